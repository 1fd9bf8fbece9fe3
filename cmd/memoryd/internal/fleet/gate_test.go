package fleet

import (
	"context"
	"os"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/dataclass"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
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

func TestGateDelayedIsUntrusted(t *testing.T) {
	r := newRig(t, func(q *wire.SessionQuery) strict.Variant {
		time.Sleep(time.Second) // past the gate's 200 ms
		return &wire.SessionState{Session: q.Session, Taint: dataclass.Private}
	})
	if ws := fileOne(t, r, false); ws != "host1-untrusted" {
		t.Errorf("a turn whose gate answer came late went to %q, want the untrusted workspace", ws)
	}
}

func TestGateRefusedIsUntrusted(t *testing.T) {
	r := newRig(t, func(*wire.SessionQuery) strict.Variant {
		return &wire.Error{Op: "session_query", Kind: wire.Unavailable, Msg: "no"}
	})
	if ws := fileOne(t, r, false); ws != "host1-untrusted" {
		t.Errorf("a turn whose gate query was refused went to %q", ws)
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

func TestGateNoSocketIsUntrusted(t *testing.T) {
	r := newRig(t, nil)
	if ws := fileOne(t, r, false); ws != "host1-untrusted" {
		t.Errorf("without a gate socket: filed in %q", ws)
	}
}

// TestGateForgedListener: a listener that is not brokerd's user (here:
// the gate's allowed uid is another than the test's own) is never asked;
// its "clean" is not read, and the turn is untrusted.
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
	if ws := fileOne(t, r, false); ws != "host1-untrusted" {
		t.Errorf("with a forged gate listener: filed in %q", ws)
	}
	select {
	case <-asked:
		t.Error("the query was sent to a listener that is not brokerd's")
	default:
	}
}

func TestFileRules(t *testing.T) {
	for _, tt := range []struct {
		name    string
		gate    State
		gateErr error
		log     State
		max     dataclass.Class
		want    Filing
	}{
		{"clean", clean, nil, clean, dataclass.Private, Trusted},
		{"secret by log", clean, nil, State{Taint: dataclass.Secret}, dataclass.Private, Withheld},
		{"secret by broker", State{Taint: dataclass.Secret}, nil, clean, dataclass.Private, Withheld},
		{"secret, gate down", State{}, &GateError{}, State{Taint: dataclass.Secret}, dataclass.Private, Withheld},
		{"above public", clean, nil, clean, dataclass.Public, Withheld},
		{"public under public", State{Taint: dataclass.Public}, nil, State{Taint: dataclass.Public}, dataclass.Public, Trusted},
		{"gate down", State{}, &GateError{}, clean, dataclass.Private, Untrusted},
		{"both untrusted", State{Taint: dataclass.Private, Untrusted: true}, nil, State{Taint: dataclass.Private, Untrusted: true}, dataclass.Private, Untrusted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, why := File(tt.gate, tt.gateErr, tt.log, tt.max); got != tt.want {
				t.Errorf("File = %s (%s), want %s", got, why, tt.want)
			}
		})
	}
}
