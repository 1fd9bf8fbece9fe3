package stack

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
)

// TestStackOutcomeAfterGatewayDies: gatewayd is killed (SIGKILL) while a
// DM's turn waits on the model, so bxctl up stops the stack; at the next
// start the turn's outcome (closed as interrupted) is posted in the DM's
// thread, marked with its turn, and a further restart posts it no more.
func TestStackOutcomeAfterGatewayDies(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	bin := Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd", "gatewayd")
	state := ShortState(t)
	srv := llama.New(t, llama.Options{Slots: 2, NCtx: 65536})
	selftestReplies(srv)
	srv.Script(
		llama.Reply{Reasoning: "Time first.", ToolCalls: []llama.ToolCall{{Name: "clock", Arguments: `{}`}}},
		llama.Reply{Reasoning: "Slow.", Content: "never sent", StallAfter: 1, Stall: 10 * time.Minute},
	)
	chat := newChatRig(t)
	preconfigure(t, state, srv)
	chat.writeGatewayConfig(t, state, 0o600)
	u, _ := url.Parse(srv.URL())
	env := chat.tokenEnv()
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(state, "logs", "gatewayd.log"))
		return string(b)
	}
	connected := func(n int) { chat.connected(t, n, logs) }
	botPosts := chat.botPosts
	fmm, owner, dm := chat.mm, chat.owner, chat.dm

	exited := Up(t, bin, state, u.Host, env)
	connected(1)
	hello, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: dm, Message: "what time is it?"})
	require.NoError(t, err)
	for i := 0; len(srv.Requests(0)) < 2; i++ {
		if i > 1500 {
			t.Fatalf("the turn never reached its second model call:\n%s", logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pidOf(t, bin+"/gatewayd"), syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("bxctl up did not stop after gatewayd died")
	}
	if n := len(botPosts(hello.ID)); n != 0 {
		t.Fatalf("%d bot posts before the restart, want 0", n)
	}

	selftestReplies(srv)
	exited = Up(t, bin, state, u.Host, env)
	var got []mm.Post
	for i := 0; len(got) == 0; i++ {
		if i > 1500 {
			t.Fatalf("the outcome was not posted after the restart:\n%s", logs())
		}
		time.Sleep(20 * time.Millisecond)
		got = botPosts(hello.ID)
	}
	if !strings.Contains(got[0].Message, "loopd stopped during this turn") || got[0].Props["boxmaker_turn"] != "mm-"+hello.ID+":1:1/1" {
		t.Fatalf("outcome post = %q, props %v", got[0].Message, got[0].Props)
	}
	pid := pidOf(t, bin+"/bxctl", "up", state)
	syscall.Kill(pid, syscall.SIGTERM)
	<-exited
	selftestReplies(srv)
	Up(t, bin, state, u.Host, env)
	time.Sleep(time.Second)
	connected(1) // the start-up delivery runs before the WebSocket
	if n := len(botPosts(hello.ID)); n != 1 {
		t.Errorf("after a second restart the thread has %d bot posts, want 1", n)
	}
}
