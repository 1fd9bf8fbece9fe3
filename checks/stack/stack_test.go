package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	session "wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// stack builds the binaries, starts the fake llama-server with the
// self-test's replies scripted, and writes inferproxy's config into a new
// state directory. Tests that use it are skipped with -short.
func stack(t *testing.T, nctx int) (bin, state string, srv *fake.Server) {
	t.Helper()
	return stackWith(t, fake.Options{Slots: 2, NCtx: nctx})
}

// stackWith is stack with the fake server's options.
func stackWith(t *testing.T, opts fake.Options) (bin, state string, srv *fake.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	bin = buildStack(t)
	state = filepath.Join(roletest.Dir(t), "state")
	srv = fake.New(t, opts)
	selftestReplies(srv)
	preconfigure(t, state, srv)
	return bin, state, srv
}

// buildStack builds the role binaries into one directory.
func buildStack(t *testing.T) string {
	t.Helper()
	return Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd")
}

// selftestReplies are what a capable model answers loopd's startup
// self-test: a call to the declared tool, then two plain turns.
func selftestReplies(srv *fake.Server) {
	srv.Script(
		fake.Reply{Reasoning: "The time.", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}},
		fake.Reply{Reasoning: "Greet.", Content: "Hello."},
		fake.Reply{Reasoning: "Again.", Content: "Hello again."},
	)
}

// up runs `bxctl up` (with any extra flags) until the test ends (or until
// the returned channel says it has exited).
func up(t *testing.T, bin, state string, srv *fake.Server, extra ...string) <-chan error {
	t.Helper()
	u, _ := url.Parse(srv.URL())
	return Up(t, bin, state, u.Host, nil, extra...)
}

// preconfigure writes inferproxy's config before bxctl up does (it never
// rewrites one): the fake answers instantly, so this conversation opens
// connections far faster than any real model could, and inferproxy's
// default accept rate (10 a second, a burst of 20) would refuse them.
func preconfigure(t *testing.T, state string, srv *fake.Server) {
	t.Helper()
	u, _ := url.Parse(srv.URL())
	require.NoError(t, os.MkdirAll(filepath.Join(state, "config"), 0o700))
	cfg := fmt.Sprintf("upstream = %q\naccepts_per_sec = 1000\naccept_burst = 1000\n", u.Host)
	require.NoError(t, os.WriteFile(filepath.Join(state, "config", "inferproxy.toml"), []byte(cfg), 0o600))
}

func chat(t *testing.T, bin, state, sessionID, msg string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "bxctl"), "chat", "--state", state, "--session", sessionID, "--message", msg)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bxctl chat --message %q: %v\n%s%s", msg, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestStackThirtyTurns runs the real binaries over real sockets against
// the fake llama-server: `bxctl up`, then a 30-turn `bxctl chat --message`
// conversation with tool calls. It then reads the session log back and
// shows, for every model call, that the server processed only what the
// call added (prompt_n from the log's usage records, checked against the
// fake's own tokenizer), and that replaying the log reproduces each
// request's messages byte for byte.
func TestStackThirtyTurns(t *testing.T) {
	t.Parallel()
	bin, state, srv := stack(t, 65536)
	up(t, bin, state, srv)
	for i := 1; i <= 30; i++ {
		answer := fmt.Sprintf("Answer %d.", i)
		switch i % 5 {
		case 1:
			srv.Script(fake.Reply{Reasoning: "Check the time.", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}})
		case 3:
			srv.Script(fake.Reply{Reasoning: "Find and call a tool.", ToolCalls: []fake.ToolCall{{Name: "find_tool", Arguments: `{"query":"read a file"}`}}},
				fake.Reply{Reasoning: "Read it.", ToolCalls: []fake.ToolCall{{Name: "call_tool", Arguments: `{"name":"read_file","arguments":{"path":"/etc/hostname"}}`}}})
		}
		srv.Script(fake.Reply{Reasoning: fmt.Sprintf("Turn %d.", i), Content: answer})
		if out := chat(t, bin, state, "s1", fmt.Sprintf("Message %d <&> from the owner.", i)); !strings.Contains(out, answer) {
			t.Fatalf("turn %d: output %q lacks %q", i, out, answer)
		}
	}
	checkLog(t, state, "s1", srv.Requests(0), true)
}

// checkLog maps each assistant record to the request that produced it and
// checks that replaying the log up to it gives that request's messages
// byte for byte; with cache, also that prompt_n was only what the call
// added.
func checkLog(t *testing.T, state, id string, requests [][]byte, cache bool) {
	t.Helper()
	dir := filepath.Join(state, "sessions", id)
	var base session.Baseline
	if b, err := os.ReadFile(filepath.Join(dir, "0.baseline.json")); err != nil || strict.Unmarshal(b, &base) != nil {
		t.Fatalf("baseline: %v", err)
	}
	var recs []session.Record
	b, err := os.ReadFile(filepath.Join(dir, "0.jsonl"))
	require.NoError(t, err)
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		r, err := session.Records.Decode(line)
		if err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		recs = append(recs, r)
	}
	var calls int
	var prevTokens, prevPredicted int
	for k, r := range recs {
		a, ok := r.(*session.Assistant)
		if !ok {
			continue
		}
		if calls >= len(requests) {
			t.Fatalf("the log has more model calls than the server saw (%d)", len(requests))
		}
		body := requests[calls]
		var sent struct {
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(body, &sent))
		replayed := session.Replay(base, recs[:k], a.Turn)
		if len(replayed) != len(sent.Messages) {
			t.Fatalf("call %d: replay has %d messages, the request had %d", calls, len(replayed), len(sent.Messages))
		}
		for j, m := range replayed {
			enc, _ := strict.Marshal(m)
			if !bytes.Equal(enc, sent.Messages[j]) {
				t.Fatalf("call %d message %d: replay\n%s\nrequest\n%s", calls, j, enc, sent.Messages[j])
			}
		}
		u, ok := recs[k+1].(*session.Usage)
		if !ok {
			t.Fatalf("call %d: record after the assistant is %T, want usage", calls, recs[k+1])
		}
		prompt, err := fake.RenderPrompt(body)
		require.NoError(t, err)
		tokens := len(fake.Tokenize(prompt))
		want := tokens
		if calls > 0 {
			want = tokens - (prevTokens + prevPredicted - 1)
		}
		if cache && u.PromptN != want {
			t.Errorf("call %d: prompt_n = %d, want %d (only what the call added)", calls, u.PromptN, want)
		}
		prevTokens, prevPredicted = tokens, u.PredictedN
		calls++
	}
	if calls != len(requests) || (cache && calls < 30+12) {
		t.Errorf("model calls: %d in the log, %d at the server; want equal (and at least 42 for the 30 turns)", calls, len(requests))
	}
}

// pidOf finds the process whose command line has all of words, or
// fails the test.
func pidOf(t *testing.T, words ...string) int {
	t.Helper()
	if pid := findPid(words...); pid != 0 {
		return pid
	}
	t.Fatalf("no process with %q", words)
	return 0
}

// TestStackKillMidTurn kills loopd (SIGKILL, no chance to clean up) while
// a turn waits on the model after a tool ran, starts the stack again, and
// shows that the acknowledged message is still in the session, the open
// turn is closed as interrupted, and the session continues.
func TestStackKillMidTurn(t *testing.T) {
	t.Parallel()
	bin, state, srv := stack(t, 65536)
	srv.Script(
		fake.Reply{Reasoning: "Time first.", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}},
		fake.Reply{Reasoning: "Slow.", Content: "never sent", StallAfter: 1, Stall: 10 * time.Minute},
	)
	exited := up(t, bin, state, srv)
	chatCmd := exec.Command(filepath.Join(bin, "bxctl"), "chat", "--state", state, "--session", "s1", "--message", "remember the number 7")
	var chatOut bytes.Buffer
	chatCmd.Stdout, chatCmd.Stderr = &chatOut, &chatOut
	require.NoError(t, chatCmd.Start())
	for i := 0; len(srv.Requests(0)) < 2; i++ {
		if i > 1000 {
			t.Fatalf("the turn never reached its second model call: %s", chatOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pidOf(t, bin+"/loopd", state), syscall.SIGKILL)
	if err := chatCmd.Wait(); err == nil {
		t.Errorf("bxctl chat succeeded although loopd was killed: %s", chatOut.String())
	}
	select {
	case <-exited: // bxctl up stops the stack when a role dies
	case <-time.After(time.Minute):
		t.Fatal("bxctl up did not stop after loopd died")
	}
	selftestReplies(srv)
	srv.Script(fake.Reply{Reasoning: "Recall.", Content: "You said 7."})
	up(t, bin, state, srv)
	if out := chat(t, bin, state, "s1", "what number?"); !strings.Contains(out, "You said 7.") {
		t.Fatalf("after restart: %q", out)
	}
	reqs := srv.Requests(0)
	last := string(reqs[len(reqs)-1])
	for _, want := range []string{"remember the number 7", "what number?"} {
		if !strings.Contains(last, want) {
			t.Errorf("the request after the restart lacks %q:\n%s", want, last)
		}
	}
	log, _ := os.ReadFile(filepath.Join(state, "sessions", "s1", "0.jsonl"))
	if !strings.Contains(string(log), `"reason":"interrupted"`) || !strings.Contains(string(log), `"text":"remember the number 7"`) {
		t.Errorf("log after the restart:\n%s", log)
	}
	// The stalled call (request 1) never got a reply, so no record; the
	// calls that did replay exactly. What the restarted call re-read is
	// up to the server's cache, so only the replay is checked here.
	checkLog(t, state, "s1", append(reqs[:1:1], reqs[2:]...), false)
}

// TestStackSelftestRefusesStart: loopd's startup self-test fails (the
// recorded per-slot context differs from the server's), so loopd refuses
// to start with exit code 2, naming the check and its runbook entry, and
// bxctl up reports it and stops.
func TestStackSelftestRefusesStart(t *testing.T) {
	t.Parallel()
	bin, state, srv := stack(t, 8192)
	cfg := "[model]\nname = \"fake-model\"\n[serving]\nn_ctx = 131072\n"
	require.NoError(t, os.WriteFile(filepath.Join(state, "config", "loopd.toml"), []byte(cfg), 0o600))
	u, _ := url.Parse(srv.URL())
	cmd := exec.Command(filepath.Join(bin, "bxctl"), "up", "--state", state, "--llama", u.Host, "--bin", bin)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("bxctl up = %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{"loopd did not start", "exit status 2", "configured 131072 tokens per slot, /props reports 8192", "see docs/runbook.md#selftest-context"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("bxctl up output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(layout.Socket(state, &wire.Loop)); !os.IsNotExist(err) {
		t.Errorf("loop.sock exists although loopd refused to start: %v", err)
	}
}
