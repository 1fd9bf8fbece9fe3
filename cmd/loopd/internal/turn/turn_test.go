package turn

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/broker"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/tools"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// stateDir is a fresh state directory, on tmpfs when there is one: the
// logs fsync every record, which is the point in production and only
// slows the tests.
func stateDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "loopd-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func baseline() (sessionlog.Baseline, error) {
	return sessionlog.Baseline{System: "You are a test.", Tools: tools.Core(false)}, nil
}

func openSession(t testing.TB, state string) *session.Session {
	t.Helper()
	s, err := session.Open(state, "s1", baseline)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type events []strict.Variant

func (e *events) emit(v strict.Variant) { *e = append(*e, v) }

func (e events) last() strict.Variant { return e[len(e)-1] }

// stub is a broker port with a fixed answer.
type stub struct {
	out     wire.ToolResult
	pending int64
	calls   []wire.ToolRequest
}

func (b *stub) Call(_ context.Context, r wire.ToolRequest, pending func(int64)) wire.ToolResult {
	b.calls = append(b.calls, r)
	if b.pending != 0 {
		pending(b.pending)
	}
	return b.out
}

func setup(t *testing.T, opts fake.Options, cap int) (*fake.Server, *llama.Client) {
	t.Helper()
	srv := fake.New(t, opts)
	c, err := llama.New(llama.Config{BaseURL: srv.URL(), Model: "fake-model", IDSlot: 0, ThinkingCap: cap})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func user(t *testing.T, s *session.Session, turn int64, text string) {
	t.Helper()
	if err := s.Append(&sessionlog.User{Turn: turn, Text: text}); err != nil {
		t.Fatal(err)
	}
}

func call(name, args string) fake.ToolCall { return fake.ToolCall{Name: name, Arguments: args} }

func TestAnswerAndTools(t *testing.T) {
	srv, c := setup(t, fake.Options{}, 0)
	srv.Script(
		fake.Reply{Reasoning: "Time first.", ToolCalls: []fake.ToolCall{call("clock", `{}`), call("find_tool", `{"query":"file"}`)}},
		fake.Reply{Reasoning: "Read it.", ToolCalls: []fake.ToolCall{call("call_tool", `{"name":"read_file","arguments":{"path":"/etc/hosts"}}`)}},
		fake.Reply{Reasoning: "Done.", Content: "I could not read it."},
	)
	b := &stub{out: wire.ToolResult{Status: wire.StatusDenied, Output: "no grant covers read_file /etc/hosts", Label: dataclass.Label{Class: dataclass.Public}}}
	e := &Engine{Model: c, Broker: b, Now: func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) }}
	s := openSession(t, stateDir(t))
	user(t, s, 1, "What time is it, and what is in /etc/hosts?")
	var ev events
	if err := e.Run(context.Background(), s, 1, ev.emit); err != nil {
		t.Fatal(err)
	}
	if a, ok := ev.last().(*wire.Answer); !ok || a.Text != "I could not read it." {
		t.Fatalf("last event = %#v, want the answer", ev.last())
	}
	if len(b.calls) != 1 || b.calls[0].Tool != "read_file" || string(b.calls[0].Arguments) != `{"path":"/etc/hosts"}` {
		t.Errorf("broker calls = %+v, want read_file with its own arguments (never call_tool)", b.calls)
	}
	var results []*sessionlog.ToolResult
	for _, r := range s.Records() {
		if tr, ok := r.(*sessionlog.ToolResult); ok {
			results = append(results, tr)
		}
	}
	if len(results) != 3 {
		t.Fatalf("tool results = %d, want 3", len(results))
	}
	if results[0].Status != wire.StatusRan || !strings.Contains(results[0].Content, "2026-11-30 09:00:00") {
		t.Errorf("clock result = %+v", results[0])
	}
	if results[1].Status != wire.StatusRan || !strings.Contains(results[1].Content, `"name":"read_file"`) {
		t.Errorf("find_tool result = %+v", results[1])
	}
	if results[2].Status != wire.StatusDenied || results[2].Tool != "read_file" {
		t.Errorf("call_tool result = %+v, want denied read_file", results[2])
	}
	var denied *wire.ToolDenied
	for _, v := range ev {
		if d, ok := v.(*wire.ToolDenied); ok {
			denied = d
		}
	}
	if denied == nil || denied.Tool != "read_file" || denied.Reason != "no grant covers read_file /etc/hosts" {
		t.Errorf("tool_denied event = %+v", denied)
	}
	st := session.StateOf(s.Records())
	if st.Interrupted != 0 || st.Waiting != 0 || st.NextTurn != 2 {
		t.Errorf("state after the turn = %+v", st)
	}
}

func stopped(t *testing.T, ev events, s *session.Session, want wire.StopReason) {
	t.Helper()
	st, ok := ev.last().(*wire.Stopped)
	if !ok || st.Reason != want {
		t.Fatalf("last event = %#v, want stopped %s", ev.last(), want)
	}
	recs := s.Records()
	if _, ok := recs[len(recs)-1].(*sessionlog.TurnEnd); !ok {
		t.Errorf("last record = %#v, want turn_end", recs[len(recs)-1])
	}
	if got := session.StateOf(recs); got.Interrupted != 0 || len(got.Pending) != 0 {
		t.Errorf("state after a stop = %+v: every call needs a result", got)
	}
	// The next request must still be a valid conversation: every tool call
	// answered, in order.
	msgs := sessionlog.Replay(s.Baseline, recs, 1<<62)
	open := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		if m.Role == chat.RoleTool {
			delete(open, m.ToolCallID)
		}
	}
	if len(open) != 0 {
		t.Errorf("calls without results after the stop: %v", open)
	}
}

// TestThinkingCapEndsThinking: a cap of a few tokens ends each model
// call's thinking (the client sends reasoning_end; the fake, like the
// server, forces the end of the block and the model goes on), and the
// turn goes on as any other: the call the model made after the forced
// end runs, the answer after it reaches the owner, nothing is stopped,
// and each usage record says the cap fired and at how many tokens.
func TestThinkingCapEndsThinking(t *testing.T) {
	const capAt, think = 3, 200
	srv, c := setup(t, fake.Options{}, capAt)
	srv.Script(
		// 20 ms a token leaves the control call ample time to land within
		// the 200 tokens, even on a loaded machine.
		fake.Reply{ThinkTokens: think, ToolCalls: []fake.ToolCall{call("clock", `{}`)}, TokenDelay: 20 * time.Millisecond},
		fake.Reply{ThinkTokens: think, Content: "It is nine.", TokenDelay: 20 * time.Millisecond},
	)
	s := openSession(t, stateDir(t))
	user(t, s, 1, "think hard: what time is it?")
	var ev events
	e := &Engine{Model: c, Broker: broker.Refusing{}, Now: func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) }}
	if err := e.Run(context.Background(), s, 1, ev.emit); err != nil {
		t.Fatal(err)
	}
	if a, ok := ev.last().(*wire.Answer); !ok || a.Text != "It is nine." {
		t.Fatalf("last event = %#v, want the answer after the forced end of thinking", ev.last())
	}
	if srv.ControlCalls() != 2 {
		t.Errorf("control calls = %d, want 2 (one per model call)", srv.ControlCalls())
	}
	var usages, results int
	for _, r := range s.Records() {
		switch r := r.(type) {
		case *sessionlog.Usage:
			usages++
			// The control call travels while tokens keep coming, so a few
			// more than the cap arrive; far fewer than the 200 thought.
			if !r.CapFired || r.CapAt != capAt || r.CapRefused != "" || r.ReasoningTokens < capAt || r.ReasoningTokens > think/2 {
				t.Errorf("usage record %+v: want the cap fired at %d, accepted, and the thinking ended there", r, capAt)
			}
		case *sessionlog.ToolResult:
			results++
			if r.Tool != "clock" || r.Status != wire.StatusRan || !strings.Contains(r.Content, "2026-11-30 09:00:00") {
				t.Errorf("tool result %+v: want the clock call run", r)
			}
		case *sessionlog.Stopped:
			t.Errorf("the turn was stopped: %+v", r)
		}
	}
	if usages != 2 || results != 1 {
		t.Errorf("%d usage records and %d tool results, want 2 and 1", usages, results)
	}
	if st := session.StateOf(s.Records()); st.Interrupted != 0 || st.Waiting != 0 || st.NextTurn != 2 {
		t.Errorf("state after the turn = %+v", st)
	}
}

func TestToolIterationCap(t *testing.T) {
	srv, c := setup(t, fake.Options{}, 0)
	for i := range 5 {
		srv.Script(fake.Reply{Reasoning: "more", ToolCalls: []fake.ToolCall{call("find_tool", `{"query":"q`+strings.Repeat("x", i)+`"}`)}})
	}
	s := openSession(t, stateDir(t))
	user(t, s, 1, "loop")
	var ev events
	if err := (&Engine{Model: c, Broker: broker.Refusing{}, Limits: Limits{MaxCalls: 3}}).Run(context.Background(), s, 1, ev.emit); err != nil {
		t.Fatal(err)
	}
	stopped(t, ev, s, wire.StopToolIterations)
	n := 0
	for _, r := range s.Records() {
		if _, ok := r.(*sessionlog.Assistant); ok {
			n++
		}
	}
	if n != 3 {
		t.Errorf("model calls = %d, want the cap of 3", n)
	}
}

func TestRepeatedCallStopsTurn(t *testing.T) {
	srv, c := setup(t, fake.Options{}, 0)
	for range 4 {
		srv.Script(fake.Reply{Reasoning: "again", ToolCalls: []fake.ToolCall{call("clock", `{}`)}})
	}
	s := openSession(t, stateDir(t))
	user(t, s, 1, "repeat")
	var ev events
	if err := (&Engine{Model: c, Broker: broker.Refusing{}}).Run(context.Background(), s, 1, ev.emit); err != nil {
		t.Fatal(err)
	}
	stopped(t, ev, s, wire.StopRepeatedCall)
	ran := 0
	for _, r := range s.Records() {
		if tr, ok := r.(*sessionlog.ToolResult); ok && tr.Status == wire.StatusRan {
			ran++
		}
	}
	if ran != 2 {
		t.Errorf("clock ran %d times, want 2 (the third identical call is stopped)", ran)
	}
}

func TestResultCappedOnce(t *testing.T) {
	srv, c := setup(t, fake.Options{}, 0)
	srv.Script(
		fake.Reply{Reasoning: "r", ToolCalls: []fake.ToolCall{call("call_tool", `{"name":"read_file","arguments":{"path":"/big"}}`)}},
		fake.Reply{Reasoning: "r", Content: "ok"},
	)
	big := strings.Repeat("é", 100) // 200 bytes; a cap of 51 must not split a rune
	b := &stub{out: wire.ToolResult{Status: wire.StatusRan, Output: big, Label: dataclass.Label{Class: dataclass.Private, Untrusted: true}}}
	s := openSession(t, stateDir(t))
	user(t, s, 1, "read")
	var ev events
	if err := (&Engine{Model: c, Broker: b, Limits: Limits{ResultCap: 51}}).Run(context.Background(), s, 1, ev.emit); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Records() {
		if tr, ok := r.(*sessionlog.ToolResult); ok {
			if tr.Content != strings.Repeat("é", 25) || !tr.Truncated || tr.Class != dataclass.Private || !tr.Untrusted {
				t.Errorf("result = %+v, want 25 runes, truncated, labelled by the broker", tr)
			}
		}
	}
}

func TestInterruptedTurnIsClosed(t *testing.T) {
	state := stateDir(t)
	s := openSession(t, state)
	user(t, s, 1, "hello")
	msg := chat.Message{Role: "assistant", Content: "", ReasoningContent: "x", ToolCalls: []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "clock", Arguments: "{}"}}}}
	s.Append(&sessionlog.Assistant{Turn: 1, Message: msg})
	user(t, s, 2, "are you there?") // queued while turn 1 ran
	s.Close()
	s2, err := session.Open(state, "s1", baseline)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	st := session.StateOf(s2.Records())
	if st.Interrupted != 1 || len(st.Pending) != 1 || st.Waiting != 2 || st.NextTurn != 2 {
		t.Fatalf("state = %+v, want turn 1 interrupted with one call, turn 2 waiting", st)
	}
	if err := Interrupted(s2); err != nil {
		t.Fatal(err)
	}
	msgs := sessionlog.Replay(s2.Baseline, s2.Records(), 2)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,user" {
		t.Errorf("replayed roles = %s, want the interrupted result right after its call", got)
	}
	if tm := msgs[3]; !strings.HasPrefix(tm.Content, "interrupted: ") || tm.ToolCallID != "c1" {
		t.Errorf("tool message = %+v", tm)
	}
	if st := session.StateOf(s2.Records()); st.Interrupted != 0 || st.Waiting != 2 {
		t.Errorf("state after closing = %+v", st)
	}
	b, _ := json.Marshal(msgs)
	if !json.Valid(b) {
		t.Error("replay does not encode")
	}
}
