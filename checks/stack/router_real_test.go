package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/checks/llamaserver"
	"wntrmute.dev/boxmaker/checks/roletest"
	session "wntrmute.dev/boxmaker/pkg/logs/sessionlog"
)

// realCap is the thinking cap the real-router stack runs with: far below
// what the tiny model thinks before max_tokens, so every model call fires
// it.
const realCap = 16

// TestStackRouterReal: the owner's deployment shape against a real
// llama-server ($BOXMAKER_LLAMA_SERVER, skipped with one line without
// it): a router with the tiny model in a preset, its model unloaded, as
// an idle router leaves it. `bxctl up` comes up (loopd's self-test has
// the router load the model; the tiny model cannot call tools, so
// tool-call is skipped in loopd.toml), and a chat turn is answered. The
// thinking cap fires on every model call, and the turn is still
// answered, never stopped: the usage record says the cap fired at
// realCap; whether the server could end the block (the tiny vocabulary
// spells the tags in pieces) is logged, not required.
func TestStackRouterReal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	r := llamaserver.StartRouter(t)
	bin := buildStack(t)
	state := filepath.Join(roletest.Dir(t), "state")
	require.NoError(t, os.MkdirAll(filepath.Join(state, "config"), 0o700))
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(state, "config", name), []byte(body), 0o600))
	}
	write("inferproxy.toml", fmt.Sprintf("upstream = %q\n", r.Host))
	write("loopd.toml", fmt.Sprintf("[model]\nname = %q\nthinking_cap = %d\nmax_tokens = 96\n\n[selftest]\nskip = [\"tool-call\"]\n",
		llamaserver.Model, realCap))

	Up(t, bin, state, r.Host, nil)
	if st := r.Status(t); st != "loaded" {
		t.Errorf("model status after bxctl up = %q, want loaded (by loopd's self-test)", st)
	}
	out := chat(t, bin, state, "real1", "Tell me about a cat.")
	t.Logf("answer: %q", out)

	b, err := os.ReadFile(filepath.Join(state, "sessions", "real1", "0.jsonl"))
	require.NoError(t, err)
	var usage []*session.Usage
	var ended bool
	var content string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		rec, err := session.Records.Decode([]byte(line))
		require.NoError(t, err)
		switch rec := rec.(type) {
		case *session.Stopped:
			t.Errorf("the turn was stopped: %+v", rec)
		case *session.Usage:
			usage = append(usage, rec)
		case *session.Assistant:
			content = rec.Message.Content
		case *session.TurnEnd:
			ended = true
		}
	}
	if !ended || len(usage) == 0 {
		t.Fatalf("session log: turn ended %v, %d usage records; want an ended turn", ended, len(usage))
	}
	for _, u := range usage {
		if !u.CapFired || u.CapAt != realCap {
			t.Errorf("usage %+v: want the cap fired at %d", u, realCap)
		}
		t.Logf("reasoning tokens %d (cap %d), cap refused %q, predicted %d; answer text %d bytes", u.ReasoningTokens, u.CapAt, u.CapRefused, u.PredictedN, len(content))
	}
}
