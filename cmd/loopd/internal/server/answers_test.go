package server

import (
	"os"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestAnswersSince: the answers of finished turns are read back from the
// log after a restart of loopd, after the turn asked, with the turn each
// ends; the turn numbers match the live Answer events; an unknown
// session has none and is not created.
func TestAnswersSince(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(fake.Reply{Content: "first answer"}, fake.Reply{Content: "second answer"})
	state := t.TempDir()
	h := start(t, srv, state)
	c := dial(t, h)
	var turns []int64
	for _, msg := range []string{"one", "two"} {
		c.send("mm-s1", msg)
		evs := c.until()
		a, ok := evs[len(evs)-1].(*wire.Answer)
		if !ok {
			t.Fatalf("last event = %#v", evs[len(evs)-1])
		}
		turns = append(turns, a.Turn)
	}
	if turns[0] == 0 || turns[1] != turns[0]+1 {
		t.Fatalf("answer turns = %v, want two consecutive non-zero turns", turns)
	}
	h.stop()
	h = start(t, srv, state)
	c = dial(t, h)
	c.Send(&wire.AnswersSince{Session: "mm-s1", AfterTurn: 0})
	got, ok := c.next().(*wire.Answers)
	if !ok || len(got.Items) != 2 || got.More || got.Items[0].Text != "first answer" || got.Items[1].Text != "second answer" ||
		got.Items[0].Turn != turns[0] || got.Items[1].Turn != turns[1] {
		t.Fatalf("answers_since 0 = %#v", got)
	}
	c.Send(&wire.AnswersSince{Session: "mm-s1", AfterTurn: turns[0]})
	if got, ok := c.next().(*wire.Answers); !ok || len(got.Items) != 1 || got.Items[0].Text != "second answer" {
		t.Fatalf("answers_since %d = %#v", turns[0], got)
	}
	c.Send(&wire.AnswersSince{Session: "mm-none", AfterTurn: 0})
	if got, ok := c.next().(*wire.Answers); !ok || len(got.Items) != 0 {
		t.Fatalf("answers_since for an unknown session = %#v", got)
	}
	if _, err := os.Stat(session.Dir(state, "mm-none")); err == nil {
		t.Error("asking created the unknown session")
	}
	c.Send(&wire.AnswersSince{Session: "../x", AfterTurn: 0})
	if e, ok := c.next().(*wire.Error); !ok || e.Kind != wire.Invalid {
		t.Fatalf("a bad session id = %#v, want invalid", e)
	}
}

// TestFinishedCapsAndStops: a stopped turn yields its stop message, an
// unfinished turn nothing, a tool-calling reply is not an answer, and
// the count and byte caps hold with More set.
func TestFinishedCapsAndStops(t *testing.T) {
	recs := []sessionlog.Record{
		&sessionlog.User{Turn: 1, Text: "a"},
		&sessionlog.Assistant{Turn: 1, Message: chat.Message{Role: "assistant", Content: "calling", ToolCalls: []chat.ToolCall{{ID: "c1"}}}},
		&sessionlog.Assistant{Turn: 1, Message: chat.Message{Role: "assistant", Content: "done"}},
		&sessionlog.TurnEnd{Turn: 1},
		&sessionlog.User{Turn: 2, Text: "b"},
		&sessionlog.Stopped{Turn: 2, Reason: wire.StopRepeatedCall, Msg: "stopped: repeated"},
		&sessionlog.TurnEnd{Turn: 2},
		&sessionlog.User{Turn: 3, Text: "c"},
		&sessionlog.Assistant{Turn: 3, Message: chat.Message{Role: "assistant", Content: "still running"}},
	}
	items, more := finished(recs, 0)
	if more || len(items) != 2 || items[0] != (wire.FinishedTurn{Turn: 1, Text: "done"}) ||
		items[1] != (wire.FinishedTurn{Turn: 2, Text: "stopped: repeated", Reason: wire.StopRepeatedCall}) {
		t.Fatalf("finished = %#v, %v", items, more)
	}
	recs = nil
	for i := int64(1); i <= wire.MaxAnswers+3; i++ {
		recs = append(recs, &sessionlog.Assistant{Turn: i, Message: chat.Message{Content: "x"}}, &sessionlog.TurnEnd{Turn: i})
	}
	if items, more := finished(recs, 0); len(items) != wire.MaxAnswers || !more || items[0].Turn != 1 {
		t.Fatalf("count cap: %d items, more %v", len(items), more)
	}
	big := strings.Repeat("é", wire.MaxAnswersBytes) // two bytes a rune
	recs = []sessionlog.Record{
		&sessionlog.Assistant{Turn: 1, Message: chat.Message{Content: big}}, &sessionlog.TurnEnd{Turn: 1},
		&sessionlog.Assistant{Turn: 2, Message: chat.Message{Content: "next"}}, &sessionlog.TurnEnd{Turn: 2},
	}
	items, more = finished(recs, 0)
	if len(items) != 1 || !more || len(items[0].Text) > wire.MaxAnswersBytes || !strings.HasPrefix(big, items[0].Text) {
		t.Fatalf("byte cap: %d items, %d bytes, more %v", len(items), len(items[0].Text), more)
	}
}

// TestAnswersSinceClosesInterrupted: a turn in flight is reported as
// running, with no outcome; a turn left open by a stopped loopd is closed
// as interrupted when its outcomes are asked for, and its stop message is
// one of them, no longer running.
func TestAnswersSinceClosesInterrupted(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(fake.Reply{Reasoning: "Time first.", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}},
		fake.Reply{Content: "never sent", StallAfter: 1, Stall: 10 * time.Minute})
	state := t.TempDir()
	h := start(t, srv, state)
	c := dial(t, h)
	c.send("mm-s2", "slow one")
	if _, ok := c.next().(*wire.Accepted); !ok {
		t.Fatal("not accepted")
	}
	for i := 0; len(srv.Requests(0)) < 2; i++ {
		if i > 500 {
			t.Fatal("the turn never reached its second model call")
		}
		time.Sleep(10 * time.Millisecond)
	}
	side := dial(t, h)
	side.Send(&wire.AnswersSince{Session: "mm-s2", AfterTurn: 0})
	if got, ok := side.next().(*wire.Answers); !ok || len(got.Items) != 0 || !got.Running {
		t.Fatalf("answers_since while the turn runs = %#v, want no items and running", got)
	}
	h.stop()
	h = start(t, srv, state)
	c = dial(t, h)
	c.Send(&wire.AnswersSince{Session: "mm-s2", AfterTurn: 0})
	got, ok := c.next().(*wire.Answers)
	if !ok || len(got.Items) != 1 || got.Items[0].Reason != wire.StopInterrupted || got.Running {
		t.Fatalf("answers_since after an interrupted turn = %#v", got)
	}
}
