package stack

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestStackGatewayRestartsAloneMidTurn is the systemd case: gatewayd is
// killed (SIGKILL) while a DM's turn waits on the model and starts again
// by itself (its unit restarts it; loopd and the rest keep running). The
// turn is still running when the new gatewayd starts, so its start-up
// catch-up finds nothing; the answer is posted once, when the turn ends,
// without a further restart.
func TestStackGatewayRestartsAloneMidTurn(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	const stall = 20 * time.Second
	bin := Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd", "gatewayd")
	state := ShortState(t)
	srv := llama.New(t, llama.Options{Slots: 2, NCtx: 65536})
	selftestReplies(srv)
	srv.Script(llama.Reply{Reasoning: "Slow.", Content: "the answer after the restart", StallAfter: 1, Stall: stall})
	chat := newChatRig(t)
	fmm, bot, owner, dm := chat.mm, chat.bot, chat.owner, chat.dm
	preconfigure(t, state, srv)
	u, _ := url.Parse(srv.URL())
	// Without gatewayd.toml bxctl up runs the other four roles; this
	// test runs gatewayd itself, as its unit would.
	Up(t, bin, state, u.Host, nil)
	chat.writeGatewayConfig(t, state, 0o640)
	users, err := layout.LoadUsers(state)
	require.NoError(t, err)
	uid, gid := layout.ConfigFile("gatewayd").IDs(users)
	require.NoError(t, os.Chown(layout.ConfigPath(state, "gatewayd"), int(uid), int(gid)))
	var logs lockedBuffer
	gateway := func() *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, "gatewayd"), "-config", layout.ConfigPath(state, "gatewayd"), "-state", state)
		cmd.Env = append(os.Environ(), "BOXMAKER_TEST_MM_TOKEN="+bot.Token)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if !users.Single() {
			id := users.Of("gatewayd")
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: id.UID, Gid: id.GID}
		}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	connected := func(n int) { chat.connected(t, n, logs.String) }
	botPosts := chat.botPosts

	first := gateway()
	connected(1)
	before := len(srv.Requests(0))
	hello, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: dm, Message: "take your time"})
	require.NoError(t, err)
	for i := 0; len(srv.Requests(0)) <= before; i++ {
		if i > 1500 {
			t.Fatalf("the turn never reached the model:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	asked := time.Now()
	require.NoError(t, first.Process.Kill())
	first.Wait()
	for i := 0; fmm.Connections() > 0; i++ {
		if i > 1500 {
			t.Fatal("the killed gatewayd's WebSocket never closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	gateway()
	connected(1)
	if since := time.Since(asked); since > stall-5*time.Second {
		t.Fatalf("gatewayd took %v to start again, too close to the model's %v: the turn may have ended before it started", since, stall)
	}
	require.Empty(t, botPosts(hello.ID), "a post before the turn ended")
	var got []mm.Post
	for i := 0; len(got) == 0; i++ {
		if i > 3000 {
			t.Fatalf("the answer was not posted after the turn ended:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
		got = botPosts(hello.ID)
	}
	if !strings.Contains(got[0].Message, "the answer after the restart") || got[0].Props["boxmaker_turn"] != "mm-"+hello.ID+":1:1/1" {
		t.Fatalf("answer post = %q, props %v", got[0].Message, got[0].Props)
	}
	time.Sleep(2 * time.Second)
	if n := len(botPosts(hello.ID)); n != 1 {
		t.Errorf("the thread has %d bot posts, want 1", n)
	}
}
