package stack

import (
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	honchofake "wntrmute.dev/boxmaker/checks/fake/honcho"
	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/first"
)

// TestStackAskMemory: with loopd.toml's ask_memory, the model is offered
// ask_memory in its tools array, and its call goes through brokerd's
// built-in rule to memoryd, which asks Honcho's dialectic; the answer
// comes back labelled (the agent's own untrusted workspace is among
// those read, so memory-tainted) and the session is untrusted. Without
// the option the tool is not offered (TestStackFleetCanary's sessions).
func TestStackAskMemory(t *testing.T) {
	t.Parallel()
	bin, state, srv := stack(t, 65536)
	var mu sync.Mutex
	var asked []honchofake.ChatCall
	answer := "The owner drinks MARK-DIALECTIC genmaicha."
	hon := honchofake.New(t, honchofake.Options{Chat: func(c honchofake.ChatCall) *string {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, c)
		return &answer
	}})
	fleetConfigs(t, state, hon.URL)
	loopd := first.Configs[1]
	require.Equal(t, "loopd", loopd.Role)
	text := "ask_memory = true\n" + loopd.Text(first.Params{State: state, Model: "fake-model"})
	require.NoError(t, os.WriteFile(loopd.Path(state), []byte(text), 0o600))
	up(t, bin, state, srv)

	srv.Script(
		fake.Reply{Reasoning: "Ask the fleet.", ToolCalls: []fake.ToolCall{{Name: "ask_memory", Arguments: `{"question":"What tea does the owner like?"}`}}},
		fake.Reply{Reasoning: "Done.", Content: "Genmaicha."},
	)
	chat(t, bin, state, "ask1", "what tea do I like?")
	reqs := srv.Requests(0)
	require.NotEmpty(t, reqs)
	require.Contains(t, string(reqs[len(reqs)-1]), `"name":"ask_memory"`, "the tools array offers ask_memory")
	r := toolResults(t, state, "ask1")
	require.Len(t, r, 1, show(r))
	require.Contains(t, r[0].Content, "MARK-DIALECTIC", show(r))
	require.Contains(t, r[0].Content, "memory-tainted", show(r))
	require.True(t, r[0].Untrusted, show(r))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, asked, "Honcho's dialectic was never asked")
	require.Equal(t, "What tea does the owner like?", asked[0].Query)
}
