package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestAnswersSinceClosesUnanswered: loopd stops during a turn's first
// model call, so the log holds only the owner's message (the turn left
// no record of having started). The next loopd, asked for the session's
// outcomes (gatewayd's sweep after its connection broke), closes that
// turn as interrupted and reports it: the message is not left waiting,
// unanswered, for a next message that may never come.
func TestAnswersSinceClosesUnanswered(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(fake.Reply{Content: "never sent", StallAfter: 1, Stall: 10 * time.Minute})
	state := t.TempDir()
	h := start(t, srv, state)
	c := dial(t, h)
	c.send("mm-u1", "first words")
	if _, ok := c.next().(*wire.Accepted); !ok {
		t.Fatal("not accepted")
	}
	for i := 0; len(srv.Requests(0)) < 1; i++ {
		if i > 500 {
			t.Fatal("the turn never reached the model")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.stop()
	h = start(t, srv, state)
	c = dial(t, h)
	c.Send(&wire.AnswersSince{Session: "mm-u1", AfterTurn: 0})
	got, ok := c.next().(*wire.Answers)
	if !ok || len(got.Items) != 1 || got.Items[0].Turn != 1 || got.Items[0].Reason != wire.StopInterrupted || got.Items[0].Text != turn.UnansweredMsg || got.Running {
		t.Fatalf("answers_since after a turn stopped in its first model call = %#v", got)
	}
	// Asked again, nothing changes: the turn is closed once.
	c.Send(&wire.AnswersSince{Session: "mm-u1", AfterTurn: 0})
	if again, ok := c.next().(*wire.Answers); !ok || len(again.Items) != 1 {
		t.Fatalf("answers_since asked again = %#v", again)
	}
	log := readLog(t, state, "mm-u1")
	if strings.Count(log, `"type":"turn_end"`) != 1 || !strings.Contains(log, `"text":"first words"`) {
		t.Errorf("the log after the close:\n%s", log)
	}
	// The message stays in the conversation: the next turn sends it.
	srv.Script(fake.Reply{Content: "Both read."})
	c = dial(t, h)
	c.send("mm-u1", "second words")
	c.next()
	evs := c.until()
	if a, ok := evs[len(evs)-1].(*wire.Answer); !ok || a.Turn != 2 {
		t.Fatalf("the next turn ended with %#v, want turn 2's answer", evs[len(evs)-1])
	}
	if last := string(srv.LastRequest(0)); !strings.Contains(last, "first words") || !strings.Contains(last, "second words") {
		t.Errorf("the next turn's request lacks the earlier message:\n%s", last)
	}
}

// TestFailedTurnEndsWithItsCause: the model's stream breaks mid-turn
// while loopd runs on (inferproxy or llama-server died). The turn is
// closed at once, its cause its outcome: the follower gets a stopped
// event for the turn, the log ends the turn, answers_since reports the
// same outcome, and the session goes on.
func TestFailedTurnEndsWithItsCause(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(fake.Reply{Reasoning: "Think.", Content: "cut off", ErrorAfter: 3, Error: &fake.Error{Code: 500, Message: "the server fell over", Type: "server_error"}})
	state := t.TempDir()
	h := start(t, srv, state)
	c := dial(t, h)
	c.send("mm-f1", "will this work?")
	c.next()
	evs := c.until()
	st, ok := evs[len(evs)-1].(*wire.Stopped)
	if !ok || st.Turn != 1 || st.Reason != wire.StopInterrupted || !strings.HasPrefix(st.Msg, "the turn failed: model:") || !strings.Contains(st.Msg, "the server fell over") {
		t.Fatalf("the failed turn ended with %#v, want a stopped event naming its cause", evs[len(evs)-1])
	}
	// The follower hears the stop just before the turn is marked over.
	var got *wire.Answers
	for i := 0; i == 0 || ok && got.Running && i < 200; i++ {
		time.Sleep(5 * time.Millisecond)
		c.Send(&wire.AnswersSince{Session: "mm-f1", AfterTurn: 0})
		got, ok = c.next().(*wire.Answers)
	}
	if !ok || len(got.Items) != 1 || got.Items[0].Text != st.Msg || got.Running {
		t.Fatalf("answers_since after the failed turn = %#v", got)
	}
	recs, err := session.EpochRecords(state, "mm-f1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs[len(recs)-1].(*sessionlog.TurnEnd); !ok || session.StateOf(recs).NextTurn != 2 {
		t.Errorf("the log after the failed turn: %#v", recs)
	}
	srv.Script(fake.Reply{Content: "Now it works."})
	c.send("mm-f1", "again?")
	c.next()
	evs = c.until()
	if a, ok := evs[len(evs)-1].(*wire.Answer); !ok || a.Turn != 2 {
		t.Fatalf("the next turn ended with %#v", evs[len(evs)-1])
	}
}

func readLog(t *testing.T, state, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(session.Dir(state, id), "0.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
