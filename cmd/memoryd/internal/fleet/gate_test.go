package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

var clean = State{Taint: dataclass.Private}

// fileOne writes one clean-looking turn (or an untrusted one), files it
// through the gate, sends it, and returns the workspace Honcho holds it
// in ("" if none).
func fileOne(t *testing.T, r *rig, untrustedLog bool) string {
	t.Helper()
	ts := turnSpec{said: "GATE-USER", reply: "GATE-REPLY"}
	if untrustedLog {
		ts.tool, ts.untrusted = "GATE-TOOL", true
	}
	writeLog(t, r.sessions, "g1", ts)
	if _, err := r.fleet.TurnEnded(context.Background(), "g1", 0); err != nil {
		t.Fatal(err)
	}
	r.drain()
	got := where(t, r.honcho)
	if got["GATE-USER"] != got["GATE-REPLY"] {
		t.Errorf("the turn's two messages went to %q and %q", got["GATE-USER"], got["GATE-REPLY"])
	}
	return got["GATE-REPLY"]
}

func TestGateCleanIsTrusted(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	if ws := fileOne(t, r, false); ws != "host1-trusted" {
		t.Errorf("a clean turn brokerd calls clean went to %q", ws)
	}
}

// switchable is a gate that answers with first until switched, then
// with after.
type switchable struct {
	switched atomic.Bool
	first    func(q *wire.SessionQuery) strict.Variant
	after    State
}

func (g *switchable) answer(q *wire.SessionQuery) strict.Variant {
	if !g.switched.Load() {
		return g.first(q)
	}
	return &wire.SessionState{Session: q.Session, Taint: g.after.Taint, Untrusted: g.after.Untrusted}
}

// deferredThenFiled files a turn loopd's log labels clean while the gate
// gives no usable answer: nothing may reach Honcho, not even after a
// drain, until the gate answers; then the turn goes where File says,
// exactly once, and where returns it ("" if nowhere).
func deferredThenFiled(t *testing.T, r *rig, g *switchable) string {
	t.Helper()
	writeLog(t, r.sessions, "g1", turnSpec{said: "GATE-USER", reply: "GATE-REPLY"})
	if _, err := r.fleet.TurnEnded(context.Background(), "g1", 0); !errors.Is(err, ErrDeferred) {
		t.Fatalf("TurnEnded with no gate answer = %v, want ErrDeferred", err)
	}
	r.drain()
	if n := len(r.honcho.Messages()); n != 0 {
		t.Fatalf("before brokerd answered, Honcho holds %d messages of the turn: filed by loopd's labels alone", n)
	}
	if n, err := r.fleet.Retry(context.Background()); err != nil || n != 1 || r.fleet.Pending() != 1 {
		t.Fatalf("Retry while the gate still fails = %d, %v (pending %d); want the session still waiting", n, err, r.fleet.Pending())
	}
	r.drain()
	if n := len(r.honcho.Messages()); n != 0 {
		t.Fatalf("a retry the gate did not answer sent %d messages", n)
	}
	g.switched.Store(true)
	if n, err := r.fleet.Retry(context.Background()); err != nil || n != 0 || r.fleet.Pending() != 0 {
		t.Fatalf("Retry once the gate answers = %d, %v (pending %d)", n, err, r.fleet.Pending())
	}
	r.drain()
	// A second retry and a catch-up file nothing again.
	r.fleet.Retry(context.Background())
	r.fleet.CatchUp(context.Background(), []string{filepath.Join(r.sessions, "g1", "0.jsonl")})
	r.drain()
	got := where(t, r.honcho)
	if got["GATE-USER"] != got["GATE-REPLY"] {
		t.Errorf("the turn's two messages went to %q and %q", got["GATE-USER"], got["GATE-REPLY"])
	}
	if n := len(r.honcho.Messages()); n != 0 && n != 2 {
		t.Errorf("Honcho holds %d messages, want the turn's 2 once", n)
	}
	return got["GATE-REPLY"]
}

// TestGateUnavailableDefers (review finding 7): brokerd's gate answers
// Unavailable; a turn loopd labels clean reaches no workspace until the
// gate answers, and then the untrusted one (its answer came late),
// exactly once.
func TestGateUnavailableDefers(t *testing.T) {
	g := &switchable{first: func(*wire.SessionQuery) strict.Variant {
		return &wire.Error{Op: "session_query", Kind: wire.Unavailable, Msg: "brokerd cannot read session state now"}
	}, after: clean}
	r := newRig(t, g.answer)
	if ws := deferredThenFiled(t, r, g); ws != "host1-untrusted" {
		t.Errorf("a turn whose gate answered only later went to %q, want the untrusted workspace", ws)
	}
}

// TestGateLateSecretIsWithheld: what brokerd says when it answers
// decides, not loopd's labels: a session brokerd holds as secret, whose
// log says private, is written nowhere.
func TestGateLateSecretIsWithheld(t *testing.T) {
	g := &switchable{first: func(*wire.SessionQuery) strict.Variant {
		return &wire.Error{Op: "session_query", Kind: wire.Unavailable, Msg: "no"}
	}, after: State{Taint: dataclass.Secret}}
	r := newRig(t, g.answer)
	if ws := deferredThenFiled(t, r, g); ws != "" {
		t.Errorf("a session brokerd holds as secret was written to %q", ws)
	}
	if s, _ := r.fleet.Status(); s.Withheld != 1 {
		t.Errorf("status %+v, want the turn withheld", s)
	}
}

func TestGateDelayedIsUntrusted(t *testing.T) {
	g := &switchable{first: func(q *wire.SessionQuery) strict.Variant {
		time.Sleep(time.Second) // past the gate's 200 ms
		return &wire.SessionState{Session: q.Session, Taint: dataclass.Private}
	}, after: clean}
	r := newRig(t, g.answer)
	if ws := deferredThenFiled(t, r, g); ws != "host1-untrusted" {
		t.Errorf("a turn whose gate answer came late went to %q, want the untrusted workspace", ws)
	}
}

func TestGateRefusedIsUntrusted(t *testing.T) {
	g := &switchable{first: func(*wire.SessionQuery) strict.Variant {
		return &wire.Error{Op: "session_query", Kind: wire.Invalid, Msg: "no"}
	}, after: clean}
	r := newRig(t, g.answer)
	if ws := deferredThenFiled(t, r, g); ws != "host1-untrusted" {
		t.Errorf("a turn whose gate query was refused went to %q", ws)
	}
}

// TestGateLateSurvivesRestart: a turn deferred live and memoryd
// restarted before brokerd answered is still late at the next start's
// catch-up: untrusted, never trusted.
func TestGateLateSurvivesRestart(t *testing.T) {
	g := &switchable{first: func(*wire.SessionQuery) strict.Variant {
		return &wire.Error{Op: "session_query", Kind: wire.Unavailable, Msg: "no"}
	}, after: clean}
	r := newRig(t, g.answer)
	writeLog(t, r.sessions, "g1", turnSpec{said: "GATE-USER", reply: "GATE-REPLY"})
	if _, err := r.fleet.TurnEnded(context.Background(), "g1", 0); !errors.Is(err, ErrDeferred) {
		t.Fatalf("TurnEnded = %v, want ErrDeferred", err)
	}
	r.fleet.Close()
	r.open()
	g.switched.Store(true)
	if n, err := r.fleet.CatchUp(context.Background(), []string{filepath.Join(r.sessions, "g1", "0.jsonl")}); n != 0 || err != nil {
		t.Fatalf("CatchUp = %d, %v", n, err)
	}
	r.drain()
	if got := where(t, r.honcho); got["GATE-REPLY"] != "host1-untrusted" || len(got) != 2 {
		t.Errorf("after a restart the late turn went to %v, want both messages untrusted", got)
	}
}

func TestGateContradictingIsUntrusted(t *testing.T) {
	// brokerd says clean; loopd's log shows an untrusted result.
	r := newRig(t, brokerSays(clean))
	if ws := fileOne(t, r, true); ws != "host1-untrusted" {
		t.Errorf("brokerd clean, log untrusted: filed in %q", ws)
	}
	// brokerd says untrusted; the log shows nothing untrusted.
	r = newRig(t, brokerSays(State{Taint: dataclass.Private, Untrusted: true}))
	if ws := fileOne(t, r, false); ws != "host1-untrusted" {
		t.Errorf("brokerd untrusted, log clean: filed in %q", ws)
	}
}

// TestGateNoSocketWritesNothing: without a gate no answer of brokerd's
// can come, so no turn is written (none by loopd's labels alone); the
// turns stay in the logs for a start with a gate.
func TestGateNoSocketWritesNothing(t *testing.T) {
	r := newRig(t, nil)
	writeLog(t, r.sessions, "g1", turnSpec{said: "GATE-USER", reply: "GATE-REPLY"})
	if _, err := r.fleet.TurnEnded(context.Background(), "g1", 0); !errors.Is(err, ErrNoGate) {
		t.Fatalf("TurnEnded without a gate = %v, want ErrNoGate", err)
	}
	if n, err := r.fleet.CatchUp(context.Background(), []string{filepath.Join(r.sessions, "g1", "0.jsonl")}); n != 0 || err != nil {
		t.Fatalf("CatchUp without a gate = %d, %v; want nothing deferred (nothing will answer) and no error", n, err)
	}
	r.drain()
	if n := len(r.honcho.Messages()); n != 0 || r.fleet.Pending() != 0 {
		t.Errorf("without a gate socket Honcho holds %d messages (pending %d)", n, r.fleet.Pending())
	}
	if rebuilt, _ := r.fleet.outbox.Rebuilt(); !rebuilt {
		t.Error("a catch-up that filed nothing ended the new outbox's looking up")
	}
}

// TestGateForgedListener: a listener that is not brokerd's user (here:
// the gate's allowed uid is another than the test's own) is never asked;
// its "clean" is not read, and the turn is written nowhere.
func TestGateForgedListener(t *testing.T) {
	asked := make(chan bool, 1)
	r := newRig(t, func(q *wire.SessionQuery) strict.Variant {
		asked <- true
		return &wire.SessionState{Session: q.Session, Taint: dataclass.Private}
	})
	r.gate.Listeners = []uint32{uint32(os.Getuid()) + 4242}
	r.fleet.Close()
	r.open()
	_, err := r.gate.Ask(context.Background(), "g1")
	if err == nil {
		t.Fatal("a listener of another uid was believed")
	}
	writeLog(t, r.sessions, "g1", turnSpec{said: "GATE-USER", reply: "GATE-REPLY"})
	if _, err := r.fleet.TurnEnded(context.Background(), "g1", 0); !errors.Is(err, ErrDeferred) {
		t.Fatalf("TurnEnded with a forged listener = %v, want ErrDeferred", err)
	}
	r.drain()
	if n := len(r.honcho.Messages()); n != 0 {
		t.Errorf("with a forged gate listener Honcho holds %d messages", n)
	}
	select {
	case <-asked:
		t.Error("the query was sent to a listener that is not brokerd's")
	default:
	}
}

func TestFileRules(t *testing.T) {
	for _, tt := range []struct {
		name string
		gate State
		late bool
		log  State
		max  dataclass.Class
		want Filing
	}{
		{"clean", clean, false, clean, dataclass.Private, Trusted},
		{"secret by log", clean, false, State{Taint: dataclass.Secret}, dataclass.Private, Withheld},
		{"secret by broker", State{Taint: dataclass.Secret}, false, clean, dataclass.Private, Withheld},
		{"secret by log, late", clean, true, State{Taint: dataclass.Secret}, dataclass.Private, Withheld},
		{"secret by broker, late", State{Taint: dataclass.Secret}, true, clean, dataclass.Private, Withheld},
		{"above public", clean, false, clean, dataclass.Public, Withheld},
		{"public under public", State{Taint: dataclass.Public}, false, State{Taint: dataclass.Public}, dataclass.Public, Trusted},
		{"late", clean, true, clean, dataclass.Private, Untrusted},
		{"both untrusted", State{Taint: dataclass.Private, Untrusted: true}, false, State{Taint: dataclass.Private, Untrusted: true}, dataclass.Private, Untrusted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, why := File(tt.gate, tt.late, tt.log, tt.max); got != tt.want {
				t.Errorf("File = %s (%s), want %s", got, why, tt.want)
			}
		})
	}
}
