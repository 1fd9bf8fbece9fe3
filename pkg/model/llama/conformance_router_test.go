package llama_test

import (
	"slices"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/llamaserver"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/model/selftest"
)

// TestConformanceRouter is the suite's real-server leg in the owner's
// deployment shape: llama-server as a router (--models-preset, --models-max
// 2) with the tiny model in a preset, started with the model unloaded, as
// an idle router leaves it. The self-test (the one loopd runs at start)
// must get the model loaded and pass every check but the tool call (the
// tiny model cannot call tools); then the conformance suite (a turn, two
// turns on the pinned slot, /tokenize, ...) runs through the router, and
// a completion pinned to slot 0 is found on slot 0. Skipped with one line
// without $BOXMAKER_LLAMA_SERVER.
func TestConformanceRouter(t *testing.T) {
	r := llamaserver.StartRouter(t)
	c, err := llama.New(llama.Config{BaseURL: r.URL, Model: llamaserver.Model, IDSlot: 1, MaxTokens: 16,
		Sampling: &greedy, FirstByteTimeout: conformanceTimeout, ModelLoadTimeout: conformanceTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Props(t.Context()); err == nil || !strings.Contains(err.Error(), "model is not loaded") {
		t.Fatalf("Props before any load = %v, want the router's \"model is not loaded\" (autoload=false)", err)
	}

	rep := selftest.Run(t.Context(), c, 1, selftest.Expect{NCtx: llamaserver.SlotContext, Slots: 2, OtherSlots: []int{0}})
	for _, ck := range rep.Checks {
		t.Logf("self-test %s %v: %s", ck.Name, ck.OK, ck.Detail)
	}
	if f := rep.Failed(); len(f) > 0 && !slices.Equal(f, []string{selftest.CheckToolCall}) {
		t.Errorf("self-test from unloaded failed %v, want at most tool-call (the tiny model cannot call tools)", f)
	}
	if !strings.Contains(rep.Checks[0].Detail, "loaded it for this self-test") {
		t.Errorf("server check %q does not say the router loaded the model", rep.Checks[0].Detail)
	}
	if st := r.Status(t); st != llama.ModelLoaded {
		t.Errorf("model status after the self-test = %q, want loaded", st)
	}

	runConformance(t, r.URL, llamaserver.Model, 1)

	t.Run("SlotPinning", func(t *testing.T) {
		main, err := llama.New(llama.Config{BaseURL: r.URL, Model: llamaserver.Model, IDSlot: 0, MaxTokens: 8, Sampling: &greedy,
			FirstByteTimeout: conformanceTimeout, ModelLoadTimeout: conformanceTimeout})
		if err != nil {
			t.Fatal(err)
		}
		comp, err := main.Complete(t.Context(), llama.Request{Messages: []chat.Message{
			{Role: chat.RoleUser, Content: "Once upon a time there was a little bird who sang."},
		}}, llama.SlotState{})
		if err != nil {
			t.Fatalf("Complete on slot 0: %v", err)
		}
		slots, err := main.Slots(t.Context())
		if err != nil {
			t.Fatalf("Slots: %v", err)
		}
		// Slot 0 ran the last task and processed this prompt; slot 1
		// (the suite's) ran an earlier one.
		if len(slots) != 2 || slots[0].IDTask <= slots[1].IDTask || comp.Timings == nil || slots[0].NPromptTokensProcessed != comp.Timings.PromptN {
			for i := range slots {
				slots[i].Params = nil
			}
			t.Errorf("after a completion pinned to slot 0 (prompt_n %v), /slots = %+v; want slot 0 to have run it, after slot 1's last task", comp.Timings, slots)
		}
	})

	t.Run("UnloadedAgain", func(t *testing.T) {
		// The router unloads an idle model; the next start loads it again.
		r.Unload(t)
		if how, err := c.EnsureLoaded(t.Context()); err != nil || how != llama.LoadedByUs {
			t.Errorf("EnsureLoaded after an unload = %v, %v; want LoadedByUs", how, err)
		}
	})
}
