package fleet

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestWhatIsWritten: a clean turn is its two messages (the speaker's
// from the speaker's peer, the final reply from the agent's), with ids
// from session, epoch and record; never the tool call, its result, the
// words beside the call, or reasoning. A secret turn writes nothing.
func TestWhatIsWritten(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	writeLog(t, r.sessions, "w1", turnSpec{said: "W-USER", tool: "W-TOOLRESULT", class: dataclass.Private, reasoning: "W-REASONING", reply: "W-REPLY"})
	writeLog(t, r.sessions, "w2", turnSpec{said: "W-SECRET-USER", tool: "W-SECRET-RESULT", class: dataclass.Secret, reply: "W-SECRET-REPLY"})
	for _, s := range []string{"w1", "w2"} {
		if _, err := r.fleet.TurnEnded(context.Background(), s, 0); err != nil {
			t.Fatal(err)
		}
	}
	r.drain()
	ms := r.honcho.Messages()
	if len(ms) != 2 {
		t.Fatalf("Honcho holds %d messages, want 2: %+v", len(ms), ms)
	}
	if m := ms[0]; m.Content != "W-USER" || m.Peer != "owner" || m.Workspace != "host1-trusted" || m.Session != "w1" {
		t.Errorf("speaker's message = %+v", m)
	}
	if m := ms[1]; m.Content != "W-REPLY" || m.Peer != "agent" {
		t.Errorf("reply = %+v", m)
	}
	var md map[string]string
	json.Unmarshal(ms[1].Metadata, &md)
	if md["boxmaker_id"] != "w1-e0-r4" || md["class"] != "private" || md["source"] != "memory" {
		t.Errorf("reply's metadata = %v", md)
	}
	var all strings.Builder
	for _, q := range r.honcho.Requests() {
		all.Write(q.Body)
	}
	for _, marker := range []string{"W-TOOLRESULT", "W-REASONING", "let me look", "read_file", "W-SECRET"} {
		if strings.Contains(all.String(), marker) {
			t.Errorf("a request to Honcho holds %q", marker)
		}
	}
	if s, _ := r.fleet.Status(); s.Trusted != 1 || s.Withheld != 1 {
		t.Errorf("status = %+v, want one trusted and one withheld turn", s)
	}
}

// TestAboveClassIsWithheld: with max_class public, every session
// (private at least) is withheld.
func TestAboveClassIsWithheld(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	r.settings.MaxClass = dataclass.Public
	r.fleet.Close()
	r.open()
	writeLog(t, r.sessions, "p1", turnSpec{said: "P-USER", reply: "P-REPLY"})
	r.fleet.TurnEnded(context.Background(), "p1", 0)
	r.drain()
	if n := len(r.honcho.Requests()); n != 0 {
		t.Errorf("a private session under max_class public made %d requests", n)
	}
}

// TestMovedEntries: an entry consolidate moved out of identity goes to
// the trusted workspace's identity session from the agent's peer, once.
func TestMovedEntries(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	moved := []Moved{{Note: "n3", Text: "MOVED-ENTRY", Class: dataclass.Private}, {Note: "n4", Text: "MOVED-SECRET", Class: dataclass.Secret}}
	r.fleet.Notes(moved)
	r.fleet.Notes(moved)
	r.drain()
	ms := r.honcho.Messages()
	if len(ms) != 1 || ms[0].Content != "MOVED-ENTRY" || ms[0].Session != IdentitySession || ms[0].Workspace != "host1-trusted" || ms[0].Peer != "agent" {
		t.Errorf("Honcho holds %+v", ms)
	}
}

// TestCatchUpFilesTurnsEndedWhileDown: turns in the logs that were never
// filed are filed at start; filed ones are not filed again.
func TestCatchUpFilesTurnsEndedWhileDown(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	writeLog(t, r.sessions, "c1", turnSpec{said: "C-1", reply: "C-1R"}, turnSpec{said: "C-2", reply: "C-2R"})
	r.fleet.TurnEnded(context.Background(), "c1", 0)
	writeLog(t, r.sessions, "c2", turnSpec{said: "C-3", reply: "C-3R"})
	if n, err := r.fleet.CatchUp(context.Background(), []string{r.sessions + "/c1/0.jsonl", r.sessions + "/c2/0.jsonl"}); err != nil || n != 0 {
		t.Fatal(n, err)
	}
	r.drain()
	once(t, r.honcho, []string{"C-1", "C-1R", "C-2", "C-2R", "C-3", "C-3R"})
}

// TestCatchUpWaitsForBroker: at start brokerd may not listen yet; a turn
// found then is not filed (untrusted for good) but waits until brokerd
// answers, and is then filed by its answer.
func TestCatchUpWaitsForBroker(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	sock := r.gate.Socket
	r.gate.Socket = sock + ".absent"
	r.fleet.Close()
	r.open()
	writeLog(t, r.sessions, "c1", turnSpec{said: "W-1", reply: "W-1R"})
	logs := []string{r.sessions + "/c1/0.jsonl"}
	if n, err := r.fleet.CatchUp(context.Background(), logs); err != nil || n != 1 {
		t.Fatalf("catch-up with brokerd away = %d deferred, %v; want 1", n, err)
	}
	if s, _ := r.fleet.Status(); s.Trusted+s.Untrusted+s.Withheld != 0 {
		t.Fatalf("a turn was filed while brokerd did not answer: %+v", s)
	}
	r.gate.Socket = sock
	r.fleet.Close()
	r.open()
	if n, err := r.fleet.CatchUp(context.Background(), logs); err != nil || n != 0 {
		t.Fatalf("catch-up with brokerd back = %d, %v", n, err)
	}
	r.drain()
	if got := where(t, r.honcho); got["W-1"] != "host1-trusted" {
		t.Errorf("after brokerd answered the turn went to %q", got["W-1"])
	}
}
