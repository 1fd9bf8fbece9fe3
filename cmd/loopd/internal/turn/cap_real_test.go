package turn

import (
	"context"
	"testing"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/checks/llamaserver"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/broker"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestThinkingCapReal: against a real llama-server router (skipped with
// one line without $BOXMAKER_LLAMA_SERVER), a turn whose thinking cap
// fires is answered, never stopped, whether or not the server could end
// the block (the tiny model's vocabulary spells the tags in pieces, so it
// may think on to max_tokens).
func TestThinkingCapReal(t *testing.T) {
	const capAt = 8
	r := llamaserver.StartRouter(t)
	c, err := llama.New(llama.Config{BaseURL: r.URL, Model: llamaserver.Model, IDSlot: 0, ThinkingCap: capAt, MaxTokens: 64,
		Sampling: &llama.Sampling{Temperature: 0, TopP: 1, TopK: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureLoaded(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := openSession(t, stateDir(t))
	user(t, s, 1, "Tell me a story about a cat.")
	var ev events
	if err := (&Engine{Model: c, Broker: broker.Refusing{}}).Run(context.Background(), s, 1, ev.emit); err != nil {
		t.Fatal(err)
	}
	if _, ok := ev.last().(*wire.Answer); !ok {
		t.Fatalf("last event = %#v, want the answer: the cap must not stop the turn", ev.last())
	}
	for _, rec := range s.Records() {
		switch rec := rec.(type) {
		case *sessionlog.Stopped:
			t.Errorf("the turn was stopped: %+v", rec)
		case *sessionlog.Usage:
			if !rec.CapFired || rec.CapAt != capAt {
				t.Errorf("usage %+v: want the cap fired at %d", rec, capAt)
			}
			t.Logf("reasoning tokens %d, predicted %d, cap refused %q", rec.ReasoningTokens, rec.PredictedN, rec.CapRefused)
		case *sessionlog.Assistant:
			t.Logf("answer %q", rec.Message.Content)
		}
	}
}
