package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestStop: a stop message ends the running turn (closed on disk as
// interrupted, its follower told), answers whether one ran, and the
// session's next message starts a fresh turn.
func TestStop(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(
		fake.Reply{Reasoning: "Slow.", Content: "never", BatchDelay: 1500 * time.Millisecond},
		fake.Reply{Reasoning: "Greet.", Content: "Hello again."},
	)
	state := t.TempDir()
	h := start(t, srv, state)
	c := dial(t, h)
	c.send("s1", "think hard")
	c.next() // accepted
	if _, ok := c.next().(*wire.Working); !ok {
		t.Fatal("no working event")
	}
	// Stop only once the model holds the request (its reply is taken).
	for i := 0; len(srv.Requests(0)) == 0; i++ {
		if i > 500 {
			t.Fatal("the model never got the request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	s := dial(t, h)
	s.Send(&wire.Stop{Session: "s1"})
	if d, ok := s.next().(*wire.StopDone); !ok || !d.Stopped || d.Session != "s1" {
		t.Fatalf("stop answer = %#v", d)
	}
	evs := c.until()
	if st, ok := evs[len(evs)-1].(*wire.Stopped); !ok || st.Reason != wire.StopInterrupted {
		t.Fatalf("last event = %#v, want stopped", evs[len(evs)-1])
	}
	s.Send(&wire.Stop{Session: "s1"})
	if d, ok := s.next().(*wire.StopDone); !ok || d.Stopped {
		t.Fatalf("stop with no turn = %#v", d)
	}
	s.Send(&wire.Stop{Session: "nobody"})
	if d, ok := s.next().(*wire.StopDone); !ok || d.Stopped {
		t.Fatalf("stop of an unknown session = %#v", d)
	}
	c.send("s1", "again")
	evs = c.until()
	if a, ok := evs[len(evs)-1].(*wire.Answer); !ok || a.Text != "Hello again." {
		t.Fatalf("after the stop: %#v", evs[len(evs)-1])
	}
	log, _ := os.ReadFile(filepath.Join(state, "sessions", "s1", "0.jsonl"))
	if !strings.Contains(string(log), `"reason":"interrupted"`) {
		t.Errorf("the stopped turn is not closed as interrupted:\n%s", log)
	}
}
