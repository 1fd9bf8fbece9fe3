package turn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// fullStop checks that ev ends with the one-line session_full stop and
// its runbook pointer, and returns its message.
func fullStop(t *testing.T, ev events) string {
	t.Helper()
	st, ok := ev.last().(*wire.Stopped)
	if !ok || st.Reason != wire.StopSessionFull || !strings.HasSuffix(st.Msg, "see docs/runbook.md#session-full") || strings.Contains(st.Msg, "\n") {
		t.Fatalf("last event = %#v, want a one-line session_full stop with its runbook pointer", ev.last())
	}
	return st.Msg
}

// everyCallAnswered: each tool call the model made has its result record,
// and the turn ends in a session_full stop and a TurnEnd.
func everyCallAnswered(t *testing.T, recs []sessionlog.Record, turn int64) {
	t.Helper()
	calls, results := map[string]bool{}, map[string]bool{}
	var stopped, ended bool
	for _, r := range recs {
		switch r := r.(type) {
		case *sessionlog.Assistant:
			for _, c := range r.Message.ToolCalls {
				calls[c.ID] = true
			}
		case *sessionlog.ToolResult:
			results[r.CallID] = true
		case *sessionlog.Stopped:
			stopped = stopped || (r.Turn == turn && r.Reason == wire.StopSessionFull)
		case *sessionlog.TurnEnd:
			ended = ended || r.Turn == turn
		}
	}
	for id := range calls {
		if !results[id] {
			t.Errorf("tool call %s has no result record", id)
		}
	}
	if !stopped || !ended {
		t.Errorf("turn %d: session_full stop logged %v, turn end %v; want both", turn, stopped, ended)
	}
}

// extends checks the append-only property of what was sent: each
// request's messages start with every message of the one before.
func extends(t *testing.T, bodies [][]byte) {
	t.Helper()
	var prev []json.RawMessage
	for i, b := range bodies {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		if len(req.Messages) < len(prev) {
			t.Fatalf("request %d has %d messages, fewer than the %d before", i, len(req.Messages), len(prev))
		}
		for j := range prev {
			if !bytes.Equal(prev[j], req.Messages[j]) {
				t.Fatalf("request %d changes message %d: %s, was %s", i, j, req.Messages[j], prev[j])
			}
		}
		prev = req.Messages
	}
}

// TestOverflowMidTurnIsSessionFull: tool results fill a small slot mid
// turn; the server refuses the next request with exceed_context_size_error
// and the turn ends with session_full, not an error: every call has its
// result, what was sent only ever grew, and the next message in the
// session is kept in the log and answered with the same stop, without
// asking the server again (issue 19 item 3).
func TestOverflowMidTurnIsSessionFull(t *testing.T) {
	srv, c := setup(t, fake.Options{NCtx: 2048}, 0)
	srv.Script(fake.Reply{Reasoning: "Read it, and the time.", ToolCalls: []fake.ToolCall{
		call("call_tool", `{"name":"read_file","arguments":{"path":"/big"}}`), call("clock", `{}`)}})
	// About 3,000 tokens of the fake's vocabulary: over the 2,048-token slot.
	b := &stub{out: wire.ToolResult{Status: wire.StatusRan, Output: strings.Repeat("w ", 1500), Label: dataclass.Label{Class: dataclass.Public}}}
	e := &Engine{Model: c, Broker: b}
	s := openSession(t, stateDir(t))
	user(t, s, 1, "Read /big.")
	var ev events
	if err := e.Run(context.Background(), s, 1, ev.emit); err != nil {
		t.Fatalf("Run = %v, want a session_full stop, not an error", err)
	}
	msg := fullStop(t, ev)
	if !strings.Contains(msg, "the slot holds 2048") {
		t.Errorf("stop message %q does not give the server's figures", msg)
	}
	everyCallAnswered(t, s.Records(), 1)
	sent := srv.Requests(0)
	if len(sent) != 2 {
		t.Fatalf("%d requests sent, want the first and the refused one", len(sent))
	}
	extends(t, sent)

	user(t, s, 2, "Are you there?")
	ev = nil
	if err := e.Run(context.Background(), s, 2, ev.emit); err != nil {
		t.Fatal(err)
	}
	if msg := fullStop(t, ev); !strings.Contains(msg, "kept in the log") {
		t.Errorf("the next message's stop %q does not say the message is kept", msg)
	}
	everyCallAnswered(t, s.Records(), 2)
	if n := len(srv.Requests(0)); n != 2 {
		t.Errorf("the full session sent %d requests, want no new one", n)
	}
	kept := false
	for _, r := range s.Records() {
		if u, ok := r.(*sessionlog.User); ok && u.Turn == 2 && u.Text == "Are you there?" {
			kept = true
		}
	}
	if !kept {
		t.Error("the message sent to the full session is not in its log")
	}
}

// sizing sets its engine's slot size after the first completion, from
// that completion's own figures: the slot then holds what is in use plus
// 100 tokens, less than a reply's 200.
type sizing struct {
	Model
	e *Engine
}

func (m *sizing) Complete(ctx context.Context, req llama.Request, prev llama.SlotState) (*llama.Completion, error) {
	comp, err := m.Model.Complete(ctx, req, prev)
	if err == nil && m.e.Context.NCtx == 0 {
		m.e.Context = Context{NCtx: comp.Slot.Total + 100, MaxTokens: 200}
	}
	return comp, err
}

// TestFullBeforeSending: with the slot's size known, a request that
// would start from the last usage record's context plus max_tokens over
// the slot is not sent at all; the calls already made keep their results.
func TestFullBeforeSending(t *testing.T) {
	srv, c := setup(t, fake.Options{NCtx: 65536}, 0)
	srv.Script(fake.Reply{Reasoning: "The time.", ToolCalls: []fake.ToolCall{call("clock", `{}`)}})
	e := &Engine{Broker: &stub{}}
	e.Model = &sizing{Model: c, e: e}
	s := openSession(t, stateDir(t))
	user(t, s, 1, "What time is it?")
	var ev events
	if err := e.Run(context.Background(), s, 1, ev.emit); err != nil {
		t.Fatal(err)
	}
	msg := fullStop(t, ev)
	if used := session.StateOf(s.Records()).Slot.Total; used <= 0 || !strings.Contains(msg, fmt.Sprintf("%d tokens are in use and a reply may take 200 more", used)) {
		t.Errorf("stop message %q does not give the usage record's %d tokens", msg, used)
	}
	everyCallAnswered(t, s.Records(), 1)
	if n := len(srv.Requests(0)); n != 1 {
		t.Errorf("%d requests sent, want only the first", n)
	}
}
