package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestClockSteppedBack is the M3a case: the clock steps back over
// midnight. The writer keeps appending to the newest file, never to an
// earlier day's, and the chain holds; a later date opens a new file.
func TestClockSteppedBack(t *testing.T) {
	dir := t.TempDir()
	c := newClock("2026-09-18T23:59:58Z")
	w, err := Open(dir, c.opts())
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	add := func(w *Writer) {
		t.Helper()
		seq, err := w.Append(allowed("s", "read_file"))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	add(w) // 23:59:58, 09-18
	add(w) // 23:59:59, 09-18
	add(w) // 00:00:00, 09-19
	c.Set("2026-09-18T23:59:30Z")
	add(w)
	add(w)
	w.Close()
	w, err = Open(dir, c.opts()) // a restart with the clock still behind
	if err != nil {
		t.Fatal(err)
	}
	add(w)
	c.Set("2026-09-20T06:00:00Z")
	add(w)
	w.Close()
	for file, want := range map[string]int{"2026-09-18.jsonl": 2, "2026-09-19.jsonl": 4, "2026-09-20.jsonl": 1} {
		if ls, _ := lines(t, filepath.Join(dir, file)); len(ls) != want {
			t.Errorf("%s has %d lines, want %d", file, len(ls), want)
		}
	}
	if ls, _ := lines(t, filepath.Join(dir, "2026-09-19.jsonl")); !strings.Contains(ls[1], `"time":"2026-09-18T23:59:30.000000000Z"`) {
		t.Errorf("the record written with the clock behind is not where expected: %q", ls[1])
	}
	r := wantOK(t, dir)
	if r.LastSeq != 7 || r.Files != 3 {
		t.Errorf("Verify = %+v", r)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Errorf("Append #%d returned seq %d", i, s)
		}
	}
}

func TestAppendRefusesWithoutWriting(t *testing.T) {
	dir := chainDir(t)
	w, err := Open(dir, noon())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before := snapshot(t, dir)
	tool := allowed("s", "call_tool")
	long := denied("s", NoGrant, strings.Repeat("x", MaxDetail+1), nil)
	huge := allowed("s", "write_file")
	huge.Record.Arguments = []byte(`"` + strings.Repeat("x", MaxLine) + `"`)
	for _, tt := range []struct {
		name string
		r    Record
		want string
	}{
		{"result for a denied call", result(4), "verifier would reject it: result names decision 4"},
		{"approval of an allowed call", approve(10), "approval names decision 10"},
		{"meta-tool", tool, "target tool"},
		{"detail too long", long, "over 300"},
		{"over the line limit", huge, "over the limit"},
		{"recovery", &Recovery{}, "written only by the writer itself"},
		{"accepted_break", &AcceptedBreak{}, "written only by the writer itself"},
		{"nil decision", (*Decision)(nil), "not a record a caller may append"},
	} {
		if _, err := w.Append(tt.r); err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, ErrUnavailable) {
			t.Errorf("Append(%s) = %v, want a refusal containing %q", tt.name, err, tt.want)
		}
	}
	if !sameFiles(before, snapshot(t, dir)) {
		t.Fatal("a refused append wrote to the log")
	}
	if seq, err := w.Append(result(10)); err != nil || seq != 12 {
		t.Errorf("Append after refusals = %d, %v; a refusal must not break the writer", seq, err)
	}
	if seq, err := w.Append(approve(11)); err != nil || seq != 13 {
		t.Errorf("Append(approval) = %d, %v", seq, err)
	}
	if seq, err := w.Append(result(11)); err != nil || seq != 14 {
		t.Errorf("Append(result of approved call) = %d, %v", seq, err)
	}
	r := wantOK(t, dir)
	if len(r.Unfinished) != 0 || len(r.Abandoned) != 0 {
		t.Errorf("unfinished %v, abandoned %v, want none", r.Unfinished, r.Abandoned)
	}
}

// failing is an appender that writes part of a line and then fails, as a
// full disk does.
type failing struct {
	appender
	path string
	mu   sync.Mutex
	n    int
}

func (f *failing) Append(v any) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.n > 1 {
		return f.appender.Append(v)
	}
	fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	fh.WriteString(`{"type":"decision","seq":12,"ti`)
	return 0, errors.New("write: no space left on device")
}

func TestFailedWriteMakesUnavailable(t *testing.T) {
	dir := chainDir(t)
	w, err := Open(dir, noon())
	if err != nil {
		t.Fatal(err)
	}
	w.f = &failing{appender: w.f, path: filepath.Join(dir, day2)}
	_, err = w.Append(allowed("s", "read_file"))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "see docs/runbook.md#audit-unavailable") {
		t.Fatalf("Append on a failing disk = %v", err)
	}
	for range 3 { // the disk works again; the writer still refuses
		if _, err := w.Append(allowed("s", "read_file")); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Append after a failed write = %v, want ErrUnavailable", err)
		}
	}
	w.Close()
	wantProblem(t, Verify(dir), day2+":8", "torn line")
	rec := reopen(t, dir, noon()) // the restart recovers the cut line
	if rec == nil || rec.Line != 8 || rec.Seq != 13 {
		t.Fatalf("Recovered = %+v", rec)
	}
	wantOK(t, dir)
}

func TestFailedRotationMakesUnavailable(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, noon())
	if err != nil {
		t.Fatal(err)
	}
	w.openFn = func(string) (appender, error) { return nil, errors.New("too many open files") }
	if _, err := w.Append(allowed("s", "t")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Append when the day's file cannot be opened = %v", err)
	}
	w.openFn = openJSONL
	if _, err := w.Append(allowed("s", "t")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Append after a failed open = %v", err)
	}
}

func TestClosed(t *testing.T) {
	w, err := Open(t.TempDir(), noon())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := w.Append(allowed("s", "t")); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("Append after Close = %v", err)
	}
}

func TestConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	c := newClock("2026-09-18T23:58:00Z") // crosses midnight mid-test
	w, err := Open(dir, c.opts())
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 16, 20
	var wg sync.WaitGroup
	got := make([][]int64, workers)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				seq, err := w.Append(allowed("s", "read_file"))
				if err != nil {
					t.Error(err)
					return
				}
				rseq, err := w.Append(result(seq))
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], seq, rseq)
			}
		}()
	}
	wg.Wait()
	w.Close()
	seen := map[int64]bool{}
	for g, seqs := range got {
		for i, s := range seqs {
			if seen[s] {
				t.Fatalf("seq %d returned twice", s)
			}
			seen[s] = true
			if i > 0 && s <= seqs[i-1] {
				t.Errorf("worker %d: seq %d after %d", g, s, seqs[i-1])
			}
		}
	}
	r := wantOK(t, dir)
	if r.LastSeq != 2*workers*each || len(seen) != 2*workers*each || len(r.Unfinished) != 0 || r.Files != 2 {
		t.Errorf("Verify = %+v, %d distinct seqs", r, len(seen))
	}
	if seq, head := (func() (int64, string) {
		w, err := Open(dir, c.opts())
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		return w.Head()
	})(); seq != r.LastSeq || head != r.Head {
		t.Errorf("Head after reopen = %d %s, Verify says %d %s", seq, head, r.LastSeq, r.Head)
	}
}

// skewed is an appender that reports another line number, as when a
// second process appends to the same file.
type skewed struct{ appender }

func (s skewed) Append(v any) (int, error) {
	n, err := s.appender.Append(v)
	return n + 1, err
}

func TestAnotherWriterDetected(t *testing.T) {
	dir := chainDir(t)
	w, err := Open(dir, noon())
	if err != nil {
		t.Fatal(err)
	}
	w.f = skewed{w.f}
	if _, err := w.Append(allowed("s", "t")); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "another process") {
		t.Errorf("Append with a line number off by one = %v", err)
	}
	w.Close()

	c := newClock("2026-09-18T23:59:59Z")
	if w, err = Open(chainDir(t), c.opts()); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendRaw(t, filepath.Join(w.dir, "2026-09-19.jsonl"), "{}\n")
	if _, err := w.Append(allowed("s", "t")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(allowed("s", "t")); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "2026-09-19.jsonl appeared with 1 lines") {
		t.Errorf("Append into a new day's file that already has lines = %v", err)
	}
}
