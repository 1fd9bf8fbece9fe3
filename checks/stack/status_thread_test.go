package stack

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestStackStatusInThread: `!status` in a Mattermost thread, against the
// whole stack through gatewayd, after a turn with a tool call and an
// anchor of the audit log: each item `bxctl status` shows (golden, times
// and versions masked), never sent to the model; then, with brokerd and
// inferproxy stopped (SIGSTOP: their sockets accept and nothing answers,
// so llama-server's /props gets no answer either), the answer still
// comes within its bound and says who did not answer.
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
	out, err := bxctl(t, bin, "audit", "anchor", "--anchors", filepath.Join(t.TempDir(), "anchors"), layout.Audit.In(state))
	require.NoError(t, err, out)
	before := len(srv.Requests(0))
	_, err = chat.mm.PostAs(chat.owner.ID, mm.Post{ChannelID: chat.dm, RootID: hello.ID, Message: "!status"})
	require.NoError(t, err)
	threadGolden(t, wait(2)[1].Message, "status_thread.txt")
	require.Equal(t, before, len(srv.Requests(0)), "!status reached the model")

	var stopped []int
	for _, role := range []string{"brokerd", "inferproxy"} {
		pid := pidOf(t, filepath.Join(bin, role)+" ", state)
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		stopped = append(stopped, pid)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	}
	began := time.Now()
	_, err = chat.mm.PostAs(chat.owner.ID, mm.Post{ChannelID: chat.dm, RootID: hello.ID, Message: "!status"})
	require.NoError(t, err)
	got := wait(3)[2].Message
	require.Less(t, time.Since(began), 10*time.Second, "!status waited past its bound")
	threadGolden(t, got, "status_thread_silent.txt")
	for _, pid := range stopped {
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	}
}

// threadGolden compares a !status post with testdata/name, its times,
// durations, versions and prefill masked.
func threadGolden(t *testing.T, got, name string) {
	t.Helper()
	got = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+Z`).ReplaceAllString(got, "TIME")
	got = regexp.MustCompile(`prefill [0-9]+\.[0-9] s`).ReplaceAllString(got, "prefill S s")
	got = regexp.MustCompile(`\(version [^,\n]*`).ReplaceAllString(got, "(version V)")
	got = regexp.MustCompile(`, [0-9hms.]+ ago`).ReplaceAllString(got, ", D ago")
	golden := filepath.Join("testdata", name)
	if os.Getenv("BOXMAKER_UPDATE_GOLDEN") != "" {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}
