package consultlog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

func lines(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func writeLines(t *testing.T, dir string, ls []string) {
	t.Helper()
	out := ""
	if len(ls) > 0 {
		out = strings.Join(ls, "\n") + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rechain rewrites every line from index i on with seq and prev chained
// from the line before, as a forger who knows the rules would.
func rechain(t *testing.T, ls []string, i int) []string {
	t.Helper()
	prev := audit.Genesis
	if i > 0 {
		prev = audit.LineHash([]byte(ls[i-1]))
	}
	for k := i; k < len(ls); k++ {
		r, err := records.Decode([]byte(ls[k]))
		if err != nil {
			t.Fatal(err)
		}
		h := r.head()
		h.Seq, h.Prev = int64(k+1), prev
		if resp, ok := r.(*Response); ok {
			resp.RequestSHA256 = audit.LineHash([]byte(ls[resp.Request-1]))
		}
		b, err := records.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		ls[k], prev = string(b), audit.LineHash(b)
	}
	return ls
}

// TestHeadCatchesWhatTheChainCannot: each edit below left a log whose
// chain holds, and Verify passed it; Open and VerifyEnd now refuse it
// by the head record, with the entry that explains it.
func TestHeadCatchesWhatTheChainCannot(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(t *testing.T, dir string)
		want string
	}{
		{"drop the newest record", func(t *testing.T, dir string) {
			ls := lines(t, dir)
			writeLines(t, dir, ls[:len(ls)-1])
		}, "ends at seq 3, but brokerd wrote up to seq 4"},
		{"delete the whole file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, FileName)); err != nil {
				t.Fatal(err)
			}
		}, "ends at seq 0, but brokerd wrote up to seq 4"},
		{"delete the whole directory", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}, "#consult-truncated"},
		{"append a well-chained forged record", func(t *testing.T, dir string) {
			ls := lines(t, dir)
			forged := request(`{"forged":true}`)
			forged.Seq, forged.Time, forged.Prev = 5, "2026-12-01T00:00:00.000000000Z", audit.LineHash([]byte(ls[3]))
			b, err := records.Encode(&forged)
			if err != nil {
				t.Fatal(err)
			}
			writeLines(t, dir, append(ls, string(b)))
		}, "goes on to seq 5, past seq 4"},
		{"re-chain from an edited record", func(t *testing.T, dir string) {
			ls := lines(t, dir)
			ls[2] = strings.Replace(ls[2], `\"b\"`, `\"c\"`, 1)
			writeLines(t, dir, rechain(t, ls, 2))
		}, "the line at seq 4 hashes to"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "consult")
			fill(t, dir)
			tt.edit(t, dir)
			if rep := Verify(dir, ""); !rep.OK() {
				t.Fatalf("the edit broke the chain (%v): the test is not of what the chain cannot see", rep.Problem)
			}
			e := VerifyEnd(dir, "", nil)
			if e.OK() || e.HeadProblem == nil || !strings.Contains(e.HeadProblem.Error(), tt.want) {
				t.Fatalf("VerifyEnd head problem = %v, want %q", e.HeadProblem, tt.want)
			}
			_, err := Open(dir)
			var he *audit.HeadError
			if !errors.As(err, &he) || !strings.Contains(err.Error(), tt.want) || !strings.HasSuffix(err.Error(), Head.See[he.Kind]) {
				t.Fatalf("Open = %v, want a head error %q", err, tt.want)
			}
			// The owner's way past it: adopt the log as it is.
			if _, _, err := AdoptHead(dir, time.Now()); err != nil {
				t.Fatal(err)
			}
			w, err := Open(dir)
			if err != nil {
				t.Fatalf("Open after AdoptHead = %v", err)
			}
			w.Close()
			if e := VerifyEnd(dir, "", nil); !e.OK() {
				t.Fatalf("VerifyEnd after AdoptHead = %v", e.HeadProblem)
			}
			if aside, _ := filepath.Glob(audit.HeadPath(dir) + ".replaced-*"); len(aside) != 1 {
				t.Errorf("old head kept aside: %v", aside)
			}
		})
	}
}

// TestFailedBeforeItsContainerRanThenCut: a consult whose container never
// ran leaves a request and a response in the consult log and no result
// in the audit log, so cutting both off left nothing the audit link could
// see. The head record sees it.
func TestFailedBeforeItsContainerRanThenCut(t *testing.T) {
	root := t.TempDir()
	adir, dir := filepath.Join(root, "audit"), filepath.Join(root, "consult")
	os.Mkdir(adir, 0o700)
	aw, err := audit.Open(adir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Close()
	seq, err := aw.Append(&audit.Decision{Record: audit.DecisionRecord{Session: "s-1", Tool: "consult", Arguments: json.RawMessage(`{"question":"q"}`),
		Verdict: audit.Verdict{Outcome: audit.Allowed, Grant: &audit.GrantRef{ID: "c", SHA256: hashA}, Taint: dataclass.Private}}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := AuditHash(adir, seq)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := request(`{"q":1}`)
	r.Decision, r.DecisionSHA256 = seq, h
	rseq, _, err := w.Request(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Response(Response{Request: rseq, Error: "the call could not be run: create container: no space left on device"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if e := VerifyEnd(dir, adir, nil); !e.OK() {
		t.Fatalf("the intact log fails: %v %v", e.Problem, e.HeadProblem)
	}
	writeLines(t, dir, nil)
	if rep := Verify(dir, adir); !rep.OK() {
		t.Fatalf("Verify with the audit links = %v: the test's premise (nothing else shows the cut) is wrong", rep.Problem)
	}
	e := VerifyEnd(dir, adir, nil)
	if e.HeadProblem == nil || !strings.Contains(e.HeadProblem.Error(), "ends at seq 0, but brokerd wrote up to seq 2") || !strings.HasSuffix(e.HeadProblem.Error(), "see docs/runbook.md#consult-truncated") {
		t.Fatalf("VerifyEnd = %v", e.HeadProblem)
	}
}

// TestHeadCrashStates: a crash between the head's two writes leaves a log
// one line past the head whose next names that line, or a head whose
// next was never written; both are the writer's own states and Open
// settles them. A missing head for a log with lines, or one that does not
// read, is refused.
func TestHeadCrashStates(t *testing.T) {
	for _, tt := range []struct {
		name string
		head func(ls []string) string
		ok   bool
	}{
		{"line written, second head write lost", func(ls []string) string {
			return headLine(audit.Head{Seq: 3, Hash: audit.LineHash([]byte(ls[2])), Next: audit.LineHash([]byte(ls[3]))})
		}, true},
		{"first head write only", func(ls []string) string {
			return headLine(audit.Head{Seq: 4, Hash: audit.LineHash([]byte(ls[3])), Next: hashA})
		}, true},
		{"one line past, next names another", func(ls []string) string {
			return headLine(audit.Head{Seq: 3, Hash: audit.LineHash([]byte(ls[2])), Next: hashA})
		}, false},
		{"head missing", func([]string) string { return "" }, false},
		{"head torn", func([]string) string { return `{"seq":4` }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "consult")
			fill(t, dir)
			ls := lines(t, dir)
			hp := audit.HeadPath(dir)
			if s := tt.head(ls); s == "" {
				os.Remove(hp)
			} else {
				os.WriteFile(hp, []byte(s), 0o600)
			}
			w, err := Open(dir)
			if tt.ok != (err == nil) {
				t.Fatalf("Open = %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				var he *audit.HeadError
				if !errors.As(err, &he) || he.Kind == audit.HeadTruncated || !strings.HasSuffix(err.Error(), Head.See[he.Kind]) {
					t.Errorf("Open = %v, want a head entry (missing or differs)", err)
				}
				return
			}
			defer w.Close()
			h, err := audit.ReadHead(hp)
			if err != nil || h.Seq != 4 || h.Next != "" || h.Hash != audit.LineHash([]byte(ls[3])) {
				t.Errorf("head after Open = %+v, %v; want the log's end, settled", h, err)
			}
		})
	}
}

func headLine(h audit.Head) string {
	b, _ := strict.Marshal(h)
	return string(b) + "\n"
}

// TestEveryAppendMovesTheHead: after each append the head names the line
// just written, with no next, and a fresh log records seq 0.
func TestEveryAppendMovesTheHead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "consult")
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if h, err := audit.ReadHead(audit.HeadPath(dir)); err != nil || h == nil || h.Seq != 0 || h.Hash != audit.Genesis {
		t.Fatalf("head of a new log = %+v, %v", h, err)
	}
	seq, sum, err := w.Request(request(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := audit.ReadHead(audit.HeadPath(dir)); h == nil || *h != (audit.Head{Seq: seq, Hash: sum}) {
		t.Fatalf("head = %+v, want seq %d %s", h, seq, sum)
	}
}

// TestAnchors: an anchor of the log's end holds; after the end is cut and
// the head made to agree (as a writer with brokerd's uid could), only the
// anchor shows it, past the end or at a line that differs.
func TestAnchors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "consult")
	fill(t, dir)
	e := VerifyEnd(dir, "", nil)
	a, ok := e.Anchor(dir, time.Now())
	if !ok || a.Seq != 4 {
		t.Fatalf("Anchor = %+v, %v", a, ok)
	}
	if e := VerifyEnd(dir, "", []audit.Anchor{a}); !e.OK() || e.Anchors != 1 {
		t.Fatalf("VerifyEnd with its own anchor = %+v", e)
	}
	ls := lines(t, dir)
	writeLines(t, dir, ls[:2])
	AdoptHead(dir, time.Now())
	if e := VerifyEnd(dir, "", []audit.Anchor{a}); e.HeadProblem != nil || len(e.AnchorProblems) != 1 || !e.AnchorProblems[0].PastEnd {
		t.Fatalf("cut and adopted: %+v", e)
	}
	ls[3] = strings.Replace(ls[3], "answer", "answen", 1)
	writeLines(t, dir, rechain(t, ls, 3))
	AdoptHead(dir, time.Now())
	if e := VerifyEnd(dir, "", []audit.Anchor{a}); e.HeadProblem != nil || len(e.AnchorProblems) != 1 || e.AnchorProblems[0].PastEnd {
		t.Fatalf("re-chained and adopted: %+v", e)
	}
	if _, ok := (End{}).Anchor(dir, time.Now()); ok {
		t.Error("an empty log was anchored")
	}
}

// TestAdoptRefusesABrokenChain: a chain that does not hold has no end to
// adopt.
func TestAdoptRefusesABrokenChain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "consult")
	fill(t, dir)
	ls := lines(t, dir)
	writeLines(t, dir, append(ls[:1], ls[2:]...))
	if _, _, err := AdoptHead(dir, time.Now()); !errors.Is(err, ErrDamaged) {
		t.Fatalf("AdoptHead on a broken chain = %v", err)
	}
}
