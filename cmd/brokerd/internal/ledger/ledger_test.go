package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

var classes = []dataclass.Class{dataclass.Public, dataclass.Private, dataclass.Secret}

// TestTaintOnlyRises runs random result sequences over a few sessions
// and checks every state against a naive oracle: the highest class seen
// (at least private) and whether any result was untrusted.
func TestTaintOnlyRises(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			d := newDirs(t)
			l := open(t, d)
			type oracle struct {
				max       dataclass.Class
				untrusted bool
				recalled  bool
			}
			want := map[string]*oracle{}
			ids := []string{"a", "b", "c"}
			for range 40 {
				id := ids[rng.IntN(len(ids))]
				c, u, tool := classes[rng.IntN(3)], rng.IntN(5) == 0, tools[rng.IntN(len(tools))]
				o := want[id]
				if o == nil {
					o = &oracle{max: dataclass.Private}
					want[id] = o
				}
				if c > o.max {
					o.max = c
				}
				o.untrusted = o.untrusted || u
				o.recalled = o.recalled || tool == "recall" || tool == "ask_memory"
				before := state(t, l, id)
				runTool(t, l, id, tool, c, u)
				got := state(t, l, id)
				if got != (policy.Session{Taint: o.max, Untrusted: o.untrusted, Recalled: o.recalled}) {
					t.Fatalf("after a %v %s result (untrusted %v): Session(%s) = %+v, want %+v", c, tool, u, id, got, *o)
				}
				if got.Taint < before.Taint || (before.Untrusted && !got.Untrusted) || (before.Recalled && !got.Recalled) {
					t.Fatalf("Session(%s) went from %+v to %+v", id, before, got)
				}
			}
		})
	}
}

// TestConcurrentResults records results for one session from many
// goroutines while readers watch: the state never falls, and ends at the
// join of everything.
func TestConcurrentResults(t *testing.T) {
	d := newDirs(t)
	l := open(t, d)
	const workers = 16
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, workers+1)
	go func() {
		prev := Fresh
		for {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			s, err := l.Session("s")
			if err != nil {
				errs <- err
				return
			}
			if s.Taint < prev.Taint || (prev.Untrusted && !s.Untrusted) {
				errs <- fmt.Errorf("state fell from %+v to %+v", prev, s)
				return
			}
			prev = s
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One worker reads a secret; one an untrusted result; the
			// rest public ones, which must not lower anything.
			c, u := dataclass.Public, false
			switch w {
			case 3:
				c = dataclass.Secret
			case 7:
				u = true
			}
			for range 5 {
				seq, err := l.Decide("s", outcome(audit.Allowed))
				if err == nil {
					_, err = l.Result(result(seq, c, u))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if got, want := state(t, l, "s"), (policy.Session{Taint: dataclass.Secret, Untrusted: true}); got != want {
		t.Errorf("Session(s) = %+v, want %+v", got, want)
	}
}

func TestMissingIsFresh(t *testing.T) {
	l := open(t, newDirs(t))
	if got := state(t, l, "new"); got != Fresh {
		t.Errorf("Session(new) = %+v, want %+v", got, Fresh)
	}
	if _, err := l.Session("../x"); err == nil {
		t.Error("Session(../x) = nil error, want a refused id")
	}
}

func TestUnreadableState(t *testing.T) {
	tests := []struct {
		name  string
		plant func(path string) error
	}{
		{"garbage", write("{not json")},
		{"unknown field", write(`{"taint":"private","untrusted":false,"x":1}` + "\n")},
		{"missing field", write(`{"taint":"secret"}` + "\n")},
		{"public taint", write(`{"taint":"public","untrusted":false}` + "\n")},
		{"unknown class", write(`{"taint":"top","untrusted":false}` + "\n")},
		{"not canonical", write(`{"taint": "private", "untrusted": false}` + "\n")},
		{"no newline", write(`{"taint":"private","untrusted":false}`)},
		{"trailing data", write(`{"taint":"private","untrusted":false}{}` + "\n")},
		{"too long", write(`{"taint":"private","untrusted":false}` + string(make([]byte, maxStateFile)))},
		{"empty", write("")},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }},
		{"symlink", func(p string) error {
			target := p + ".target"
			if err := os.WriteFile(target, []byte(`{"taint":"private","untrusted":false}`+"\n"), 0o600); err != nil {
				return err
			}
			return os.Symlink(target, p)
		}},
		{"unreadable mode", func(p string) error {
			if os.Geteuid() == 0 {
				return errors.ErrUnsupported
			}
			return write(`{"taint":"private","untrusted":false}` + "\n")(p)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDirs(t)
			l := open(t, d)
			path := statePath(d.state, "s")
			if err := tt.plant(path); errors.Is(err, errors.ErrUnsupported) {
				t.Skip("root reads any file")
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.name == "unreadable mode" {
				os.Chmod(path, 0)
			}
			before := files(t, d.state)
			s, err := l.Session("s")
			var ue *UnreadableError
			if !errors.As(err, &ue) || s != worst {
				t.Fatalf("Session(s) = %+v, %v; want %+v and an *UnreadableError", s, err, worst)
			}
			var gotErr error
			var got policy.Session
			seq, err := l.Decide("s", func(s policy.Session, unreadable error) audit.DecisionRecord {
				got, gotErr = s, unreadable
				return outcome(audit.Allowed)(s, unreadable)
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != worst || !errors.As(gotErr, &ue) {
				t.Errorf("Decide gave fn %+v, %v; want %+v and an *UnreadableError", got, gotErr, worst)
			}
			if _, err := l.Result(result(seq, dataclass.Public, false)); err != nil {
				t.Fatal(err)
			}
			if after := files(t, d.state); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("the ledger changed an unreadable state file:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

func write(body string) func(string) error {
	return func(p string) error { return os.WriteFile(p, []byte(body), 0o600) }
}

func TestStateFileForm(t *testing.T) {
	d := newDirs(t)
	l := open(t, d)
	run(t, l, "s", dataclass.Secret, true)
	path := statePath(d.state, "s")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"taint":"secret","untrusted":true}` + "\n"; string(b) != want {
		t.Errorf("state file = %q, want %q", b, want)
	}
	// A session that recalled says so; one that did not is written as
	// before the field existed, so older files stay canonical.
	runTool(t, l, "r", "ask_memory", dataclass.Private, false)
	if b, _ := os.ReadFile(statePath(d.state, "r")); string(b) != `{"taint":"private","untrusted":false,"recalled":true}`+"\n" {
		t.Errorf("recalled state file = %q", b)
	}
	for _, bad := range []string{`{"taint":"private","untrusted":false,"recalled":false}`, `{"taint":"private","recalled":true,"untrusted":false}`} {
		os.WriteFile(statePath(d.state, "x"), []byte(bad+"\n"), 0o600)
		if _, err := l.Session("x"); err == nil {
			t.Errorf("state file %s read as canonical", bad)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode = %v, want 0600", fi.Mode().Perm())
	}
}

// TestAtomicWrite fails a state write at each stage before the rename:
// the old file must stay whole, no temporary file may remain, and the
// ledger must become unavailable. A restart must then rebuild the file.
func TestAtomicWrite(t *testing.T) {
	for _, stageName := range []string{"write", "sync", "rename"} {
		t.Run(stageName, func(t *testing.T) {
			d := newDirs(t)
			l := open(t, d)
			run(t, l, "s", dataclass.Private, false)
			before := files(t, d.state)
			testOnlyFail = func(s string) error {
				if s == stageName {
					return errors.New("planted failure")
				}
				return nil
			}
			defer func() { testOnlyFail = nil }()
			seq, err := l.Decide("s", outcome(audit.Allowed))
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Result(result(seq, dataclass.Secret, true))
			wantUnavailable(t, "Result with a failing state write", err)
			testOnlyFail = nil
			if after := files(t, d.state); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("after a failed write the directory holds %q, want %q", after, before)
			}
			_, err = l.Session("s")
			wantUnavailable(t, "Session after a failed state write", err)
			l.Close()
			l2 := open(t, d)
			if got, want := state(t, l2, "s"), (policy.Session{Taint: dataclass.Secret, Untrusted: true}); got != want {
				t.Errorf("after restart Session(s) = %+v, want %+v (rebuilt from the log)", got, want)
			}
		})
	}
}

// TestAuditBeforeState makes the audit write fail: the state file must
// not change, and every later call must fail.
func TestAuditBeforeState(t *testing.T) {
	d := newDirs(t)
	l := open(t, d)
	run(t, l, "s", dataclass.Private, false)
	seq, err := l.Decide("s", outcome(audit.Allowed))
	if err != nil {
		t.Fatal(err)
	}
	before := files(t, d.state)
	fl := &failingLog{auditLog: l.log, fail: true}
	l.log = fl
	_, err = l.Result(result(seq, dataclass.Secret, true))
	wantUnavailable(t, "Result", err)
	if after := files(t, d.state); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("state changed without its audit record: %q, want %q", after, before)
	}
	fl.fail = false // the ledger must stay unavailable all the same
	_, err = l.Decide("t", outcome(audit.Denied))
	wantUnavailable(t, "Decide after a failed write", err)
	_, err = l.Session("s")
	wantUnavailable(t, "Session after a failed write", err)
	_, err = l.Answer(seq, approve)
	wantUnavailable(t, "Answer after a failed write", err)
}

func TestOpenCalls(t *testing.T) {
	l := open(t, newDirs(t))
	ask, err := l.Decide("s", outcome(audit.Ask))
	if err != nil {
		t.Fatal(err)
	}
	denied, err := l.Decide("s", outcome(audit.Denied))
	if err != nil {
		t.Fatal(err)
	}
	refused, err := l.Decide("s", outcome(audit.Ask))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() (int64, error)
		ok   bool
	}{
		{"result for an unanswered ask", func() (int64, error) { return l.Result(result(ask, dataclass.Secret, false)) }, false},
		{"result for a denial", func() (int64, error) { return l.Result(result(denied, dataclass.Secret, false)) }, false},
		{"answer a denial", func() (int64, error) { return l.Answer(denied, approve) }, false},
		{"answer an unknown seq", func() (int64, error) { return l.Answer(999, approve) }, false},
		{"approve the ask", func() (int64, error) { return l.Answer(ask, approve) }, true},
		{"approve it twice", func() (int64, error) { return l.Answer(ask, approve) }, false},
		{"its result", func() (int64, error) { return l.Result(result(ask, dataclass.Secret, false)) }, true},
		{"a second result", func() (int64, error) { return l.Result(result(ask, dataclass.Secret, false)) }, false},
		{"refuse the other ask", func() (int64, error) { return l.Answer(refused, refuse) }, true},
		{"result for the refused ask", func() (int64, error) { return l.Result(result(refused, dataclass.Secret, false)) }, false},
	}
	for _, tt := range tests {
		if _, err := tt.call(); (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	if got := state(t, l, "s"); got.Taint != dataclass.Secret {
		t.Errorf("Session(s) = %+v, want secret after the approved call's result", got)
	}
}

func TestLock(t *testing.T) {
	d := newDirs(t)
	l := open(t, d)
	if l2, err := Open(d.state, d.audit, Options{}); err == nil {
		l2.Close()
		t.Error("a second Open of the same state dir succeeded")
	}
	if _, err := Rebuild(d.audit, d.state); err == nil {
		t.Error("Rebuild while the ledger is open succeeded")
	}
	l.Close()
	if _, err := Rebuild(d.audit, d.state); err != nil {
		t.Errorf("Rebuild after Close: %v", err)
	}
}

func TestStateDirRefused(t *testing.T) {
	d := newDirs(t)
	target := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(d.state), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, d.state); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(d.state, d.audit, Options{}); err == nil {
		l.Close()
		t.Error("Open accepted a state dir that is a symbolic link")
	}
}
