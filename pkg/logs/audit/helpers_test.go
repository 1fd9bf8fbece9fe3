package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// clock is a test clock that ticks one second per reading.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(s string) *clock {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &clock{t: t}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(time.Second)
	return t
}

func (c *clock) Set(s string) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// opts leaves the head record out: these tests cut and edit the log as
// no crash of the writer can (head_test.go tests the head).
func (c *clock) opts() Options { return Options{Now: c.Now, noHead: true} }

var (
	grantRead  = &GrantRef{ID: "read-notes", SHA256: strings.Repeat("ab", 32)}
	grantShell = &GrantRef{ID: "shell-ask", SHA256: strings.Repeat("cd", 32)}
	grantDeny  = &GrantRef{ID: "no-secrets", SHA256: strings.Repeat("ef", 32)}
	outputHash = strings.Repeat("12", 32)
)

func allowed(session, tool string) *Decision {
	return &Decision{Record: DecisionRecord{
		Session: session, Tool: tool, Arguments: json.RawMessage(`{"path":"/home/owner/notes.txt"}`),
		Verdict: Verdict{Outcome: Allowed, Grant: grantRead, Taint: dataclass.Private},
	}}
}

func ask(session string) *Decision {
	return &Decision{Record: DecisionRecord{
		Session: session, Tool: "shell", Arguments: json.RawMessage(`{"command":"ls -l <dir> && echo \"done\""}`),
		Verdict: Verdict{Outcome: Ask, Grant: grantShell, Taint: dataclass.Private, Untrusted: true},
	}}
}

func denied(session string, reason Reason, detail string, g *GrantRef) *Decision {
	return &Decision{Record: DecisionRecord{
		Session: session, Tool: "http_fetch", Arguments: json.RawMessage(`{"url":"https://example.com/"}`),
		Verdict: Verdict{Outcome: Denied, Reason: reason, Detail: detail, Grant: g, Taint: dataclass.Secret, Untrusted: true},
	}}
}

func result(seq int64) *Result {
	return &Result{Decision: seq, SHA256: outputHash, Size: 1234, Exit: 0, Class: dataclass.Private, Untrusted: true}
}

func approve(seq int64) *Approval {
	return &Approval{Decision: seq, Answer: AnswerApproved, Verdict: Verdict{Outcome: Allowed, Grant: grantShell, Taint: dataclass.Private, Untrusted: true}}
}

func refuse(seq int64) *Approval {
	return &Approval{Decision: seq, Answer: AnswerRefused, Verdict: Verdict{Outcome: Denied, Reason: Refused, Detail: "not now", Taint: dataclass.Private}}
}

// writeChain writes the fixture chain into dir: two days, every record
// type a caller can append, one allowed call left unfinished and one ask
// left unanswered.
func writeChain(t *testing.T, dir string) {
	t.Helper()
	c := newClock("2026-09-17T23:59:56Z")
	w, err := Open(dir, c.opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	must := func(r Record) int64 {
		t.Helper()
		seq, err := w.Append(r)
		if err != nil {
			t.Fatalf("Append(%s): %v", r.Tag(), err)
		}
		return seq
	}
	read := must(allowed("s-1", "read_file"))
	must(result(read))
	sh := must(ask("s-1"))
	must(denied("s-2", NoGrant, "no grant allows http_fetch to example.com", nil))
	must(approve(sh)) // the clock is past midnight now
	must(result(sh))
	must(denied("s-2", DenyGrant, "", grantDeny))
	later := must(ask("s-2"))
	must(refuse(later))
	must(allowed("s-2", "read_file"))
	must(ask("s-3"))
}

// chainDir is a temporary copy of the checked-in chain fixture.
func chainDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, _ := filepath.Glob("testdata/chain/*")
	if len(files) == 0 {
		t.Fatal("no chain fixture in testdata/chain")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// lines reads a log file as lines, each without its newline; a torn last
// line is the last element, and torn reports it.
func lines(t *testing.T, path string) (ls []string, torn bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil, false
	}
	torn = b[len(b)-1] != '\n'
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"), torn
}

func writeLines(t *testing.T, path string, ls []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func appendRaw(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// wantProblem checks that r reports a problem at file:line whose reason
// contains want.
func wantProblem(t *testing.T, r Report, where, want string) *Problem {
	t.Helper()
	if r.Problem == nil {
		t.Fatalf("Verify = OK (%s), want a problem at %s", r.Summary(), where)
	}
	if got := r.Problem.Where(); got != where || !strings.Contains(r.Problem.Reason, want) {
		t.Fatalf("Verify problem = %q, want at %s with reason containing %q", r.Problem.Error(), where, want)
	}
	return r.Problem
}

func wantOK(t *testing.T, dir string) Report {
	t.Helper()
	r := Verify(dir)
	if !r.OK() {
		t.Fatalf("Verify = %v, want OK", r.Problem)
	}
	return r
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snapshot reads every file in dir, to show that something wrote nothing.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		m[e.Name()] = fileBytes(t, filepath.Join(dir, e.Name()))
	}
	return m
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
