package stack

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
)

// TestStackStatusInThread: `!status` in a Mattermost thread, against the
// whole stack through gatewayd, after a turn with a tool call: loopd's
// view of the thread's session and the roles it talks to (golden, times
// masked), never sent to the model.
func TestStackStatusInThread(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	bin := Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd", "gatewayd")
	state := ShortState(t)
	srv := llama.New(t, llama.Options{Slots: 2, NCtx: 65536})
	selftestReplies(srv)
	chat := newChatRig(t)
	preconfigure(t, state, srv)
	chat.writeGatewayConfig(t, state, 0o600)
	u, _ := url.Parse(srv.URL())
	Up(t, bin, state, u.Host, chat.tokenEnv())
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(state, "logs", "gatewayd.log"))
		return string(b)
	}
	chat.connected(t, 1, logs)
	srv.Script(
		llama.Reply{Reasoning: "Search.", ToolCalls: []llama.ToolCall{{Name: "recall", Arguments: `{"query":"tea","k":3}`}}},
		llama.Reply{Reasoning: "Answer.", Content: "Nothing about tea."},
	)
	hello, err := chat.mm.PostAs(chat.owner.ID, mm.Post{ChannelID: chat.dm, Message: "what do I drink?"})
	require.NoError(t, err)
	wait := func(n int) []mm.Post {
		for i := 0; i < 1500; i++ {
			if got := chat.botPosts(hello.ID); len(got) >= n {
				return got
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("fewer than %d bot posts in the thread:\n%s", n, logs())
		return nil
	}
	wait(1)
	before := len(srv.Requests(0))
	_, err = chat.mm.PostAs(chat.owner.ID, mm.Post{ChannelID: chat.dm, RootID: hello.ID, Message: "!status"})
	require.NoError(t, err)
	got := wait(2)[1].Message
	got = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+Z`).ReplaceAllString(got, "TIME")
	got = regexp.MustCompile(`prefill [0-9]+\.[0-9] s`).ReplaceAllString(got, "prefill S s")
	golden := filepath.Join("testdata", "status_thread.txt")
	if os.Getenv("BOXMAKER_UPDATE_GOLDEN") != "" {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
	require.Equal(t, before, len(srv.Requests(0)), "!status reached the model")
}
