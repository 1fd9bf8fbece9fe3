package llama_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
)

// These tests run the client against the fake llama-server
// (checks/fake/llama), end to end over HTTP. The liveness tests are in
// fake_liveness_test.go.

const fakeModel = "fake-model" // fake.Options.ModelAlias's default

// newFakeClient returns a client for srv. cfg supplies the slot and the
// limits; BaseURL and Model are filled in.
func newFakeClient(t *testing.T, srv *fake.Server, cfg llama.Config) *llama.Client {
	t.Helper()
	cfg.BaseURL = srv.URL()
	if cfg.Model == "" {
		cfg.Model = fakeModel
	}
	c, err := llama.New(cfg)
	if err != nil {
		t.Fatalf("llama.New: %v", err)
	}
	return c
}

// promptTokens is the size of the prompt the fake builds for a request body,
// computed with the fake's own template and tokenizer, not from anything the
// server reported.
func promptTokens(t *testing.T, body []byte) int {
	t.Helper()
	if body == nil {
		t.Fatal("no request reached the slot")
	}
	p, err := fake.RenderPrompt(body)
	if err != nil {
		t.Fatalf("RenderPrompt: %v", err)
	}
	return len(fake.Tokenize(p))
}

// requestMessages returns the messages array of a request body, each
// element as the raw bytes the client sent.
func requestMessages(t *testing.T, body []byte) []json.RawMessage {
	t.Helper()
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("decode request body: %v", err)
	}
	return req.Messages
}

var testTools = []chat.Tool{
	chat.NewTool("read_file", "Read a file from the workspace.",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"max_bytes":{"type":"integer"}},"required":["path"]}`)),
	chat.NewTool("list_dir", "List a directory.",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)),
}

// conversation drives turns on one pinned slot as loopd will: every request
// is the previous one plus the assistant message exactly as returned, plus
// new messages, and each completion gets the previous one's SlotState.
type conversation struct {
	srv  *fake.Server
	c    *llama.Client
	slot int
	req  llama.Request

	turn  int
	state llama.SlotState
	// Of the previous request: its messages as sent, its prompt in the
	// fake's tokens, and the tokens its reply generated.
	prevMsgs      []json.RawMessage
	prevPrompt    int
	prevPredicted int
}

func (cv *conversation) add(msgs ...chat.Message) {
	cv.req.Messages = append(cv.req.Messages, msgs...)
}

// complete runs the next turn with reply scripted and checks what must hold
// on every turn. lost says that the slot's cache is expected to be gone
// (another client took the slot, the model was unloaded); otherwise the
// server must process exactly the tokens this turn added.
func (cv *conversation) complete(t *testing.T, reply fake.Reply, lost bool) *llama.Completion {
	t.Helper()
	cv.turn++
	n := cv.turn
	cv.srv.Script(reply)
	prev := cv.state
	comp, err := cv.c.Complete(t.Context(), cv.req, prev)
	if err != nil {
		t.Fatalf("Complete turn %d: %v", n, err)
	}
	tm := comp.Timings
	if tm == nil {
		t.Fatalf("Complete turn %d: no timings", n)
	}
	body := cv.srv.LastRequest(cv.slot)
	prompt := promptTokens(t, body)
	msgs := requestMessages(t, body)

	if len(msgs) != len(cv.req.Messages) {
		t.Errorf("Complete turn %d: request has %d messages, want %d", n, len(msgs), len(cv.req.Messages))
	}
	for i, m := range cv.prevMsgs {
		if i >= len(msgs) || !bytes.Equal(m, msgs[i]) {
			got := "<missing>"
			if i < len(msgs) {
				got = string(msgs[i])
			}
			t.Fatalf("Complete turn %d: message %d = %s, want %s as sent in turn %d", n, i, got, m, n-1)
		}
	}
	if comp.Usage.PromptTokens != prompt {
		t.Errorf("Complete turn %d: Usage.PromptTokens = %d, want %d", n, comp.Usage.PromptTokens, prompt)
	}
	if got := tm.CacheN + tm.PromptN; got != prompt {
		t.Errorf("Complete turn %d: CacheN + PromptN = %d, want the prompt's %d tokens", n, got, prompt)
	}

	switch {
	case lost:
		if comp.CacheGap <= 1 || comp.CacheLoss == nil {
			t.Fatalf("Complete turn %d: CacheGap = %d, CacheLoss = %+v, want a loss", n, comp.CacheGap, comp.CacheLoss)
		}
		want := llama.CacheLoss{Tokens: prev.Total - tm.CacheN, PrevTotal: prev.Total, Cached: tm.CacheN}
		if *comp.CacheLoss != want || comp.CacheGap != want.Tokens {
			t.Errorf("Complete turn %d: CacheLoss = %+v, CacheGap = %d, want %+v", n, *comp.CacheLoss, comp.CacheGap, want)
		}
		// The slot kept nothing of the conversation: the loss is (nearly)
		// the whole previous context.
		if comp.CacheLoss.Tokens < prev.Total*9/10 {
			t.Errorf("Complete turn %d: CacheLoss.Tokens = %d, want about the previous context %d", n, comp.CacheLoss.Tokens, prev.Total)
		}
	case n == 1:
		if tm.PromptN != prompt {
			t.Errorf("Complete turn %d: PromptN = %d, want %d", n, tm.PromptN, prompt)
		}
		if comp.CacheGap != 0 || comp.CacheLoss != nil {
			t.Errorf("Complete turn %d: CacheGap = %d, CacheLoss = %+v, want none without a previous state", n, comp.CacheGap, comp.CacheLoss)
		}
	default:
		// The last sampled token of the previous turn is never cached.
		want := prompt - (cv.prevPrompt + cv.prevPredicted - 1)
		if tm.PromptN != want {
			t.Errorf("Complete turn %d: PromptN = %d, want %d", n, tm.PromptN, want)
		}
		if comp.CacheGap != 1 || comp.CacheLoss != nil {
			t.Errorf("Complete turn %d: CacheGap = %d, CacheLoss = %+v, want 1 and nil", n, comp.CacheGap, comp.CacheLoss)
		}
	}
	if want := tm.CacheN + tm.PromptN + tm.PredictedN; comp.Slot.Total != want {
		t.Errorf("Complete turn %d: Slot.Total = %d, want %d", n, comp.Slot.Total, want)
	}

	cv.prevMsgs, cv.prevPrompt, cv.prevPredicted = msgs, prompt, tm.PredictedN
	cv.state = comp.Slot
	cv.add(comp.Message) // unchanged
	return comp
}

// TestTwentyTurnsNoReread: over twenty turns on one slot, mixing user turns
// and tool calls with their results, the server processes exactly the tokens
// each turn added and nothing of what it had. Then another client's request
// on the slot, and a model unload, are each recorded as a cache loss once,
// and the next turn is back to a gap of 1.
func TestTwentyTurnsNoReread(t *testing.T) {
	const slot = 1
	const loadTime = 200 * time.Millisecond
	srv := fake.New(t, fake.Options{Slots: 2, LoadTime: loadTime, Seed: 1})
	cv := &conversation{
		srv:  srv,
		c:    newFakeClient(t, srv, llama.Config{IDSlot: slot}),
		slot: slot,
		req:  llama.Request{Tools: testTools},
	}
	cv.add(chat.Message{Role: chat.RoleSystem, Content: "You are a careful assistant. Use the tools when they help."})

	var pending []chat.ToolCall // calls of the previous turn, to answer
	for turn := 1; turn <= 20; turn++ {
		if len(pending) > 0 {
			for i, call := range pending {
				cv.add(chat.Message{
					Role: chat.RoleTool, ToolCallID: call.ID, Name: call.Function.Name,
					Content: fmt.Sprintf("result %d of turn %d: <ok> & done\n", i, turn-1),
				})
			}
			pending = nil
		} else {
			cv.add(chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("Question %d: is a < b && b > c? Answer in \"quotes\", café ✓.", turn)})
		}

		reply := fake.Reply{
			Reasoning: fmt.Sprintf("Turn %d: the user asks about <a> & <b>; think it through.", turn),
			Content:   fmt.Sprintf("Answer %d: yes, a < b && b > c — \"quoted\" ✓.\nSecond line.", turn),
		}
		var wantCalls []fake.ToolCall
		switch turn % 4 {
		case 2:
			wantCalls = []fake.ToolCall{{Name: "read_file", Arguments: fmt.Sprintf(`{"path":"notes/turn-%d.txt","max_bytes":4096}`, turn)}}
		case 0:
			if turn == 12 { // two calls in one reply
				wantCalls = []fake.ToolCall{
					{Name: "list_dir", Arguments: `{"path":"src/<pkg>"}`},
					{Name: "read_file", Arguments: `{"path":"src/a&b.go"}`},
				}
			}
		}
		if wantCalls != nil {
			reply.Content = "Let me look."
			reply.ToolCalls = wantCalls
		}

		comp := cv.complete(t, reply, false)
		if wantCalls == nil {
			if comp.FinishReason != "stop" || comp.Message.Content != reply.Content {
				t.Errorf("Complete turn %d: finish %q, content %q, want stop and %q", turn, comp.FinishReason, comp.Message.Content, reply.Content)
			}
			continue
		}
		if comp.FinishReason != "tool_calls" || len(comp.Message.ToolCalls) != len(wantCalls) {
			t.Fatalf("Complete turn %d: finish %q with %d tool calls, want tool_calls with %d", turn, comp.FinishReason, len(comp.Message.ToolCalls), len(wantCalls))
		}
		for i, call := range comp.Message.ToolCalls {
			if call.Function.Name != wantCalls[i].Name || call.Function.Arguments != wantCalls[i].Arguments || call.ID == "" {
				t.Errorf("Complete turn %d: tool call %d = %+v, want %+v with an id", turn, i, call, wantCalls[i])
			}
		}
		pending = comp.Message.ToolCalls
	}
	if t.Failed() {
		return
	}

	user := func(s string) { cv.add(chat.Message{Role: chat.RoleUser, Content: s}) }
	plain := func(i int) fake.Reply {
		return fake.Reply{Reasoning: fmt.Sprintf("Continue %d.", i), Content: fmt.Sprintf("Continued %d.", i)}
	}

	// The subtests continue the conversation, so each needs the one before.
	ok := t.Run("evicted", func(t *testing.T) {
		srv.Evict(slot)
		user("After another client used the slot.")
		cv.complete(t, plain(1), true)
		user("And once more.")
		cv.complete(t, plain(2), false)
	})
	if !ok {
		return
	}
	t.Run("unloaded", func(t *testing.T) {
		srv.Unload()
		user("After the model was unloaded.")
		start := time.Now()
		cv.complete(t, plain(3), true)
		if elapsed := time.Since(start); elapsed < loadTime {
			t.Errorf("Complete after Unload took %v, want at least the load time %v", elapsed, loadTime)
		}
		user("And once more.")
		cv.complete(t, plain(4), false)
	})
}

// TestThinkingCapFiresOnce: a reply thinking far past the cap gets one
// reasoning_end call, which ends the thinking block early, and the answer
// still arrives; a reply under the cap gets none.
func TestThinkingCapFiresOnce(t *testing.T) {
	const capAt = 10
	tests := []struct {
		name        string
		think       int
		fired       bool
		controls    int
		maxThinking int // ReasoningTokens must be in [min(think, capAt), maxThinking]
	}{
		// The control call travels while tokens keep coming, so a few
		// more than the cap arrive; far fewer than 200.
		{"over the cap", 200, true, 1, 100},
		{"under the cap", 5, false, 0, 5},
		{"one short of the cap", capAt - 1, false, 0, capAt - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.New(t, fake.Options{})
			// 20 ms a token leaves the control call ample time to land
			// within the 200 tokens, even on a loaded machine.
			srv.Script(fake.Reply{ThinkTokens: tt.think, Content: "The answer.", TokenDelay: 20 * time.Millisecond})
			c := newFakeClient(t, srv, llama.Config{ThinkingCap: capAt, IdleTimeout: 10 * time.Second})
			comp, err := c.Complete(t.Context(), llama.Request{Messages: []chat.Message{
				{Role: chat.RoleUser, Content: "Think hard, then answer."},
			}}, llama.SlotState{})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if comp.CapFired != tt.fired || comp.CapErr != nil {
				t.Errorf("CapFired = %v, CapErr = %v, want %v and nil", comp.CapFired, comp.CapErr, tt.fired)
			}
			if got := srv.ControlCalls(); got != tt.controls {
				t.Errorf("ControlCalls() = %d, want %d", got, tt.controls)
			}
			if lo := min(tt.think, capAt); comp.ReasoningTokens < lo || comp.ReasoningTokens > tt.maxThinking {
				t.Errorf("ReasoningTokens = %d, want between %d and %d", comp.ReasoningTokens, lo, tt.maxThinking)
			}
			if want := strings.Repeat(".", comp.ReasoningTokens); comp.Message.ReasoningContent != want {
				t.Errorf("ReasoningContent = %q, want %d dots", comp.Message.ReasoningContent, comp.ReasoningTokens)
			}
			if comp.Message.Content != "The answer." || comp.FinishReason != "stop" {
				t.Errorf("Content = %q, finish %q, want %q and stop", comp.Message.Content, comp.FinishReason, "The answer.")
			}
		})
	}
}

// TestContextOverflow: a prompt larger than the slot's context is the
// server's exceed_context_size_error, with both sizes, before any stream.
func TestContextOverflow(t *testing.T) {
	const nCtx = 256
	srv := fake.New(t, fake.Options{NCtx: nCtx})
	c := newFakeClient(t, srv, llama.Config{})
	_, err := c.Complete(t.Context(), llama.Request{Messages: []chat.Message{
		{Role: chat.RoleUser, Content: strings.Repeat("word ", nCtx)},
	}}, llama.SlotState{})
	var se *llama.ServerError
	if !errors.As(err, &se) {
		t.Fatalf("Complete: err = %v, want a *llama.ServerError", err)
	}
	want := promptTokens(t, srv.LastRequest(0))
	if !se.ExceedsContext() || se.NPromptTokens != want || se.NCtx != nCtx || se.Status != 400 || se.MidStream {
		t.Errorf("ServerError = %+v, want exceed_context_size_error with n_prompt_tokens %d and n_ctx %d, status 400, before the stream", se, want, nCtx)
	}
}
