package turn

import (
	"context"
	"testing"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestMemoryToolsAndEnded: the core memory tools go to brokerd under their
// own names with the model's arguments, their labels are logged as
// brokerd gave them, and Ended hears of the turn once its end is on disk
// and its answer has been sent (the answer never waits on memory).
func TestMemoryToolsAndEnded(t *testing.T) {
	srv, c := setup(t, fake.Options{}, 0)
	srv.Script(
		fake.Reply{Reasoning: "Look.", ToolCalls: []fake.ToolCall{call("recall", `{"query":"tea","k":2}`), call("memory", `{"action":"note","text":"tea"}`)}},
		fake.Reply{Reasoning: "Done.", Content: "Sencha."},
	)
	b := &stub{out: wire.ToolResult{Status: wire.StatusRan, Output: "[1] source=memory-tainted", Label: dataclass.Label{Class: dataclass.Private, Untrusted: true}}}
	var ended []int64
	var ev events
	s := openSession(t, stateDir(t))
	e := &Engine{Model: c, Broker: b, Ended: func(s *session.Session, turn int64) {
		id := s.ID
		recs := s.Records()
		if _, ok := recs[len(recs)-1].(*sessionlog.TurnEnd); !ok || id != "s1" {
			t.Errorf("Ended before the turn's end was logged")
		}
		if a, ok := ev.last().(*wire.Answer); !ok || a.Text != "Sencha." {
			t.Errorf("Ended before the answer was sent: last event %#v", ev.last())
		}
		ended = append(ended, turn)
	}}
	user(t, s, 1, "what tea?")
	if err := e.Run(context.Background(), s, 1, ev.emit); err != nil {
		t.Fatal(err)
	}
	if len(b.calls) != 2 || b.calls[0].Tool != "recall" || string(b.calls[0].Arguments) != `{"query":"tea","k":2}` ||
		b.calls[1].Tool != "memory" || string(b.calls[1].Arguments) != `{"action":"note","text":"tea"}` {
		t.Errorf("broker calls = %+v", b.calls)
	}
	var results []*sessionlog.ToolResult
	for _, r := range s.Records() {
		if tr, ok := r.(*sessionlog.ToolResult); ok {
			results = append(results, tr)
		}
	}
	if len(results) != 2 || results[0].Tool != "recall" || !results[0].Untrusted || results[0].Class != dataclass.Private ||
		results[1].Tool != "memory" {
		t.Errorf("results = %+v %+v", results[0], results[1])
	}
	if len(ended) != 1 || ended[0] != 1 {
		t.Errorf("Ended = %v, want turn 1 once", ended)
	}
}
