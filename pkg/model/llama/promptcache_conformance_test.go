package llama_test

import (
	"os"
	"strings"
	"testing"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
)

// stageMessage stands for loopd's staging request (cmd/loopd/internal/
// epoch.StageMessage, internal to loopd): any short user message without
// a system message or tools.
const stageMessage = "Prompt-cache staging request before a summary; reply with one word."

// runSummaryCache checks what loopd's epoch change relies on (epoch.Changer
// stage): a conversation ends on slot 0; slot 1 holds a request with the
// same system message (what the self-test or a job leaves there); after a
// short unrelated request on slot 1, a request on slot 1 that extends the
// conversation by one message reuses all of slot 0's sequence but its last
// token, from the host-RAM prompt cache. It uses both slots of the server.
func runSummaryCache(t *testing.T, baseURL, model string) {
	client := func(slot int) *llama.Client {
		c, err := llama.New(llama.Config{BaseURL: baseURL, Model: model, IDSlot: slot, MaxTokens: 16, Sampling: &greedy,
			FirstByteTimeout: conformanceTimeout, ModelLoadTimeout: conformanceTimeout})
		if err != nil {
			t.Fatalf("llama.New: %v", err)
		}
		return c
	}
	main, bg := client(0), client(1)
	complete := func(c *llama.Client, req llama.Request) *llama.Completion {
		t.Helper()
		comp, err := c.Complete(t.Context(), req, llama.SlotState{})
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if comp.Timings == nil {
			t.Fatal("Complete: no timings")
		}
		return comp
	}
	system := chat.Message{Role: chat.RoleSystem, Content: strings.Repeat("You are a careful assistant who keeps short notes. ", 30)}
	msgs := []chat.Message{system, {Role: chat.RoleUser, Content: "Hello there."}}
	var last *llama.Completion
	for _, next := range []string{"What is the time?", ""} {
		last = complete(main, llama.Request{Messages: msgs})
		msgs = append(msgs, last.Message)
		if next != "" {
			msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: next})
		}
	}
	held := last.Timings.CacheN + last.Timings.PromptN + last.Timings.PredictedN - 1 // the last sampled token is not cached
	complete(bg, llama.Request{Messages: []chat.Message{system, {Role: chat.RoleUser, Content: "Another short request."}}})
	complete(bg, llama.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: stageMessage}}, MaxTokens: 1})
	sum := complete(bg, llama.Request{Messages: append(msgs, chat.Message{Role: chat.RoleUser, Content: "Summarise this conversation."})})
	if sum.Timings.CacheN < held {
		t.Errorf("the request on slot 1 reused %d tokens (prompt_n %d), want all %d of slot 0's sequence from the prompt cache",
			sum.Timings.CacheN, sum.Timings.PromptN, held)
	}
	t.Logf("slot 0 held %d tokens; the request on slot 1: cache_n %d, prompt_n %d", held, sum.Timings.CacheN, sum.Timings.PromptN)
}

func TestSummaryCacheFake(t *testing.T) {
	srv := fake.New(t, fake.Options{Slots: 2, NCtx: 8192, PromptCache: true})
	runSummaryCache(t, srv.URL(), fakeModel)
}

// TestSummaryCacheReal runs runSummaryCache against the llama-server at
// $BOXMAKER_LLAMA_URL, with the keep-thinking template, at least 2 slots
// and its default prompt cache (--cache-ram > 0, --cache-idle-slots).
func TestSummaryCacheReal(t *testing.T) {
	base := os.Getenv("BOXMAKER_LLAMA_URL")
	if base == "" {
		t.Skip("BOXMAKER_LLAMA_URL is not set: the prompt-cache check ran against the fake only")
	}
	model, err := modelAlias(base)
	if err != nil {
		t.Fatalf("read the model name from %s/props: %v", base, err)
	}
	runSummaryCache(t, base, model)
}
