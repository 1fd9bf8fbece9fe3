package ledger

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// live drives a ledger through random decisions, answers and results.
func live(t *testing.T, l *Ledger, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	ids := []string{"a", "b", "c", "d"}
	for range 60 {
		id := ids[rng.IntN(len(ids))]
		c, u := classes[rng.IntN(3)], rng.IntN(6) == 0
		switch rng.IntN(4) {
		case 0:
			if _, err := l.Decide(id, outcome(audit.Denied)); err != nil {
				t.Fatal(err)
			}
		case 1:
			seq, err := l.Decide(id, outcomeOf(tools[rng.IntN(len(tools))], audit.Ask))
			if err != nil {
				t.Fatal(err)
			}
			if rng.IntN(2) == 0 {
				if _, err := l.Answer(seq, refuse); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := l.Answer(seq, approve); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Result(result(seq, c, u)); err != nil {
				t.Fatal(err)
			}
		default:
			runTool(t, l, id, tools[rng.IntN(len(tools))], c, u)
		}
	}
}

func TestRebuildEqualsLive(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			d := newDirs(t)
			l := open(t, d)
			live(t, l, seed)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			want := files(t, d.state)
			if len(want) == 0 {
				t.Fatal("live operation wrote no state files")
			}
			fresh := t.TempDir()
			rep, err := Rebuild(d.audit, fresh)
			if err != nil {
				t.Fatal(err)
			}
			if got := files(t, fresh); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Rebuild wrote %q, live wrote %q", got, want)
			}
			if len(rep.Written) != len(want) || len(rep.Orphans) != 0 || len(rep.Extra) != 0 {
				t.Errorf("Rebuild report = %+v, want %d written and nothing else", rep, len(want))
			}
			// Over the live files, nothing changes.
			rep, err = Rebuild(d.audit, d.state)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Written) != 0 {
				t.Errorf("Rebuild over live files rewrote %q", rep.Written)
			}
		})
	}
}

// TestRebuildRepairs lowers, removes and damages state files, and adds
// one for a session the log never names.
func TestRebuildRepairs(t *testing.T) {
	d := newDirs(t)
	l := open(t, d)
	run(t, l, "a", dataclass.Secret, true)
	run(t, l, "b", dataclass.Private, true)
	run(t, l, "c", dataclass.Public, false)
	l.Close()
	want := files(t, d.state)
	plant := map[string]string{
		"a.json": `{"taint":"private","untrusted":false}` + "\n", // lowered
		"b.json": "garbage",
		"x.json": `{"taint":"private","untrusted":false}` + "\n", // not in the log
	}
	for name, body := range plant {
		if err := os.WriteFile(d.state+"/"+name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(statePath(d.state, "c"))
	rep, err := Rebuild(d.audit, d.state)
	if err != nil {
		t.Fatal(err)
	}
	want["x.json"] = plant["x.json"]
	if got := files(t, d.state); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after Rebuild: %q, want %q", got, want)
	}
	if fmt.Sprint(rep.Written) != "[a b c]" || fmt.Sprint(rep.Extra) != "[x]" {
		t.Errorf("report = %+v, want a, b, c written and x extra", rep)
	}
}

// TestUnreadableRebuildsAsRecorded: a decision made over an unreadable
// state recorded secret and untrusted (state_unreadable), and the
// rebuild keeps that, as the worst state, recalled memory included.
func TestUnreadableRebuildsAsRecorded(t *testing.T) {
	d := newDirs(t)
	l := open(t, d)
	run(t, l, "s", dataclass.Private, false)
	if err := os.WriteFile(statePath(d.state, "s"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	// As brokerd does: a call over an unreadable state is denied
	// state_unreadable.
	if _, err := l.Decide("s", func(_ policy.Session, unreadable error) audit.DecisionRecord {
		if unreadable == nil {
			t.Error("the state was read")
		}
		return audit.DecisionRecord{Tool: "read_file", Arguments: []byte(`{}`), Verdict: audit.Verdict{Outcome: audit.Denied, Reason: audit.StateUnreadable}}
	}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := Rebuild(d.audit, d.state); err != nil {
		t.Fatal(err)
	}
	s, _, err := readState(d.state, "s")
	if err != nil || s != worst {
		t.Errorf("after Rebuild state = %+v, %v; want %+v", s, err, worst)
	}
}

// TestOpenAfterCrash: without the clean mark, Open rebuilds; with it,
// Open trusts the files.
func TestOpenAfterCrash(t *testing.T) {
	tests := []struct {
		name  string
		clean bool
		want  string
	}{
		{"crash", false, `{"taint":"secret","untrusted":true}` + "\n"},
		{"clean close", true, `{"taint":"private","untrusted":false}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDirs(t)
			l := open(t, d)
			run(t, l, "s", dataclass.Secret, true)
			if tt.clean {
				l.Close()
			} else { // a crash: the files are released, no mark is written
				l.log.Close()
				l.flock.Close()
				l.closed = true
			}
			// A state behind the log, as a crash between the audit
			// append and the state write would leave it.
			if err := os.WriteFile(statePath(d.state, "s"), []byte(`{"taint":"private","untrusted":false}`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			open(t, d)
			b, err := os.ReadFile(statePath(d.state, "s"))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("after reopening: %q, want %q", b, tt.want)
			}
		})
	}
}

func TestRebuildRefusesBrokenLog(t *testing.T) {
	d := newDirs(t)
	l := open(t, d)
	run(t, l, "s", dataclass.Secret, false)
	l.Close()
	ents, err := os.ReadDir(d.audit)
	if err != nil || len(ents) != 1 {
		t.Fatalf("audit dir: %v, %v", ents, err)
	}
	path := d.audit + "/" + ents[0].Name()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[20] ^= 1 // inside the first record's time
	if err := os.WriteFile(path, append(b, b...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Rebuild(d.audit, t.TempDir()); err == nil {
		t.Error("Rebuild accepted a broken audit log")
	}
}
