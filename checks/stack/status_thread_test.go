package stack

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	honchofake "wntrmute.dev/boxmaker/checks/fake/honcho"
	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestStackStatusInThread: `!status` in a Mattermost thread, against the
// whole stack through gatewayd, after a turn with a tool call, a session
// allowance and a pending approval in another thread, fleet memory on a fake
// Honcho, and an anchor of the audit log: each item `bxctl status` shows (golden, times
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
	preconfigure(t, state, srv)
	honchoConfigs(t, state, honchofake.New(t, honchofake.Options{}).URL)
	sc := newSoakChat(t, state) // the owner may approve; an ask grant on ~/Downloads
	chat := sc.chatRig
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
	pendingApproval(t, srv, sc, logs)
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

// pendingApproval leaves, in a thread of its own, a session allowance in
// force (a read the owner approved with `session`) and a pending
// approval (a second read, unanswered).
func pendingApproval(t *testing.T, srv *llama.Server, sc *soakChat, logs func() string) {
	t.Helper()
	read := func(path string) llama.Reply {
		return llama.Reply{Reasoning: "Read it.", ToolCalls: []llama.ToolCall{{Name: "call_tool", Arguments: `{"name":"read_file","arguments":{"path":"` + path + `"}}`}}}
	}
	srv.Script(read("/home/owner/Downloads/report.pdf"), llama.Reply{Reasoning: "No.", Content: "I could not read the report."},
		read("/home/owner/Downloads/other.pdf"))
	until := func(what string, cond func([]mm.Post) bool, root string) []mm.Post {
		for i := 0; i < 1500; i++ {
			if ps := sc.botPosts(root); cond(ps) {
				return ps
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no %s in thread %s:\n%s", what, root, logs())
		return nil
	}
	live := func(ps []mm.Post) []string {
		var out []string
		for _, p := range ps {
			if m := soakCode.FindStringSubmatch(p.Message); m != nil && soakApproval.MatchString(p.Message) {
				out = append(out, m[1], m[2])
			}
		}
		return out
	}
	ask, err := sc.mm.PostAs(sc.owner.ID, mm.Post{ChannelID: sc.dm, Message: "read my report"})
	require.NoError(t, err)
	first := live(until("approval", func(ps []mm.Post) bool { return len(live(ps)) == 2 }, ask.ID))
	_, err = sc.mm.PostAs(sc.owner.ID, mm.Post{ChannelID: sc.dm, RootID: ask.ID, Message: "!approve " + first[0] + " " + first[1] + " session"})
	require.NoError(t, err)
	until("answer", func(ps []mm.Post) bool {
		return slices.ContainsFunc(ps, func(p mm.Post) bool { return strings.Contains(p.Message, "I could not read the report.") })
	}, ask.ID)
	_, err = sc.mm.PostAs(sc.owner.ID, mm.Post{ChannelID: sc.dm, RootID: ask.ID, Message: "and the other one"})
	require.NoError(t, err)
	until("second approval", func(ps []mm.Post) bool { return len(live(ps)) == 2 && live(ps)[0] != first[0] }, ask.ID)
}

// threadGolden compares a !status post with testdata/name, its times,
// durations, versions and prefill masked.
func threadGolden(t *testing.T, got, name string) {
	t.Helper()
	got = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+Z`).ReplaceAllString(got, "TIME")
	got = regexp.MustCompile(`prefill [0-9]+\.[0-9] s`).ReplaceAllString(got, "prefill S s")
	got = regexp.MustCompile(`\(version [^,\n]*`).ReplaceAllString(got, "(version V)")
	got = regexp.MustCompile(`, [0-9hms.]+ ago`).ReplaceAllString(got, ", D ago")
	got = regexp.MustCompile(`mm-[0-9a-z]+`).ReplaceAllString(got, "mm-ID")
	got = regexp.MustCompile(`outbox [0-9]+ pending, [0-9]+ sent`).ReplaceAllString(got, "outbox P pending, S sent")
	got = regexp.MustCompile(`#[0-9]+`).ReplaceAllString(got, "#N")
	golden := filepath.Join("testdata", name)
	if os.Getenv("BOXMAKER_UPDATE_GOLDEN") != "" {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}
