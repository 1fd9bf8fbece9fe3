package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	session "wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// smallConfig writes loopd.toml with max_tokens 200 (room for the
// scripted tool calls), so that a small slot
// passes the fit check when the baseline leaves room.
func smallConfig(t *testing.T, state string) {
	t.Helper()
	cfg := "[model]\nname = \"fake-model\"\nmax_tokens = 200\n"
	require.NoError(t, os.WriteFile(filepath.Join(state, "config", "loopd.toml"), []byte(cfg), 0o600))
}

var baselineCount = regexp.MustCompile(`the baseline \(system message, tools, a one-word message\) is (\d+) tokens`)

// TestStackFullContext is the new user's server of issue 19: slots of
// 2,048 tokens. loopd's self-test refuses to start, naming the fit check
// and its runbook entry. On a slot just big enough for the baseline, a
// turn whose tool results overflow it mid-turn ends with session_full
// (bxctl chat shows one line with the runbook pointer, never an internal
// error), every tool call has its result in the log, what was sent only
// ever grew, and the next message lands in a new epoch and is answered.
func TestStackFullContext(t *testing.T) {
	t.Parallel()
	bin, state, srv := stack(t, 2048)
	smallConfig(t, state)
	u, _ := url.Parse(srv.URL())
	out, err := exec.Command(filepath.Join(bin, "bxctl"), "up", "--state", state, "--llama", u.Host, "--bin", bin).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("bxctl up on 2048-token slots = %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{"loopd did not start", "a slot holds 2048: every turn would overflow", "see docs/runbook.md#selftest-fit"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("bxctl up output lacks %q:\n%s", want, out)
		}
	}
	m := baselineCount.FindSubmatch(out)
	if m == nil {
		t.Fatalf("bxctl up output gives no baseline count:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	if n+200+1024 <= 2048 {
		t.Fatalf("the baseline is %d tokens: it fits 2048 with max_tokens 200, so the refusal above is wrong", n)
	}

	// A slot that holds the baseline, max_tokens and the margin, and 16
	// tokens more.
	bin, state, srv = stack(t, n+200+1024+16)
	smallConfig(t, state)
	up(t, bin, state, srv)
	var calls []fake.ToolCall
	for i := range 3 {
		// No tool matches: each answer is the whole catalog.
		calls = append(calls, fake.ToolCall{Name: "find_tool", Arguments: fmt.Sprintf(`{"query":"nothing%d"}`, i)})
	}
	srv.Script(fake.Reply{Reasoning: "Look.", ToolCalls: calls})
	chatOut := chatStopped(t, bin, state, "s1", "Hello.")
	if !strings.Contains(chatOut, "the turn was stopped (session_full): this session's context is full") ||
		!strings.Contains(chatOut, "see docs/runbook.md#session-full") || strings.Contains(chatOut, "internal") {
		t.Fatalf("bxctl chat on an overflowing turn:\n%s", chatOut)
	}
	sent := srv.Requests(0)
	if len(sent) != 2 {
		t.Fatalf("the main slot saw %d requests, want the first and the refused one", len(sent))
	}
	for i := 1; i < len(sent); i++ {
		// The refused request extends the first, message for message.
		prev, next := messagesOf(t, sent[i-1]), messagesOf(t, sent[i])
		if len(next) <= len(prev) {
			t.Fatalf("request %d has %d messages, the one before %d", i, len(next), len(prev))
		}
		for j := range prev {
			if !bytes.Equal(prev[j], next[j]) {
				t.Fatalf("request %d changes message %d", i, j)
			}
		}
	}
	answered(t, state, "s1", 1)

	// The next message changes the epoch first (the full turn did not
	// end with an answer, so no summary request can hold it: the new
	// epoch says so and quotes the owner's message), then runs in the new
	// epoch, nothing lost.
	srv.Script(fake.Reply{Content: "warm"}, fake.Reply{Reasoning: "Here.", Content: "I am here."})
	if out := chat(t, bin, state, "s1", "Are you there?"); !strings.Contains(out, "I am here.") {
		t.Fatalf("bxctl chat to the full session: %q", out)
	}
	recs, _ := epochRecords(t, state, "s1", 1)
	if len(recs) < 3 {
		t.Fatalf("epoch 1 = %v, want head, summary and the message", recs)
	}
	sum, ok := recs[1].(*session.Summary)
	if !ok || !strings.Contains(sum.Text, "Turns 1 to 1 of epoch 0 did not fit") || !strings.Contains(sum.Text, "turn 1: Hello.") {
		t.Errorf("epoch 1's summary = %+v", recs[1])
	}
	if u, ok := recs[2].(*session.User); !ok || u.Turn != 2 || u.Text != "Are you there?" {
		t.Errorf("epoch 1's third record = %+v, want the message that waited", recs[2])
	}
	reqs := srv.Requests(0)
	if last := messagesOf(t, reqs[len(reqs)-1]); len(last) != 3 {
		t.Errorf("epoch 1's first request has %d messages, want baseline, summary and the message", len(last))
	}
	if len(summaryRequests(t, srv, 1)) != 0 {
		t.Errorf("a summary request was sent that could not fit the slot")
	}
}

// chatStopped sends one message with bxctl chat, whose turn is expected
// to stop, and returns everything bxctl printed.
func chatStopped(t *testing.T, bin, state, sessionID, msg string) string {
	t.Helper()
	out, _ := exec.Command(filepath.Join(bin, "bxctl"), "chat", "--state", state, "--session", sessionID, "--message", msg).CombinedOutput()
	return string(out)
}

func messagesOf(t *testing.T, body []byte) [][]byte {
	t.Helper()
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	out := make([][]byte, len(req.Messages))
	for i, m := range req.Messages {
		out[i] = m
	}
	return out
}

// answered reads the session log: every tool call has its result, and
// turn ends with a session_full stop and its TurnEnd.
func answered(t *testing.T, state, id string, turn int64) []session.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "sessions", id, "0.jsonl"))
	require.NoError(t, err)
	var recs []session.Record
	calls, results := map[string]bool{}, map[string]bool{}
	var stopped, ended bool
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		r, err := session.Records.Decode(line)
		require.NoError(t, err)
		recs = append(recs, r)
		switch r := r.(type) {
		case *session.Assistant:
			for _, c := range r.Message.ToolCalls {
				calls[c.ID] = true
			}
		case *session.ToolResult:
			results[r.CallID] = true
		case *session.Stopped:
			stopped = stopped || (r.Turn == turn && r.Reason == wire.StopSessionFull)
		case *session.TurnEnd:
			ended = ended || r.Turn == turn
		}
	}
	if len(calls) == 0 {
		t.Error("the log has no tool calls")
	}
	for c := range calls {
		if !results[c] {
			t.Errorf("tool call %s has no result record", c)
		}
	}
	if !stopped || !ended {
		t.Errorf("turn %d: session_full stop %v, turn end %v; want both", turn, stopped, ended)
	}
	return recs
}
