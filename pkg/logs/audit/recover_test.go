package audit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// truncate cuts n bytes off the end of file in dir.
func truncate(t *testing.T, dir, file string, n int) {
	t.Helper()
	p := filepath.Join(dir, file)
	b := fileBytes(t, p)
	if err := os.WriteFile(p, b[:len(b)-n], 0o600); err != nil {
		t.Fatal(err)
	}
}

// noon is a clock on the fixture's latest day, so records stay in its file.
func noon() Options { return newClock("2026-09-18T12:00:00Z").opts() }

// reopen opens the log, appends one decision and closes it, returning
// what Open recovered.
func reopen(t *testing.T, dir string, opts Options) *Recovery {
	t.Helper()
	w, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer w.Close()
	if _, err := w.Append(allowed("s-9", "read_file")); err != nil {
		t.Fatalf("Append after Open: %v", err)
	}
	return w.Recovered()
}

func TestTornLastLineRecovered(t *testing.T) {
	dir := chainDir(t)
	truncate(t, dir, day2, 100)
	p := wantProblem(t, Verify(dir), day2+":7", "torn line")
	if !p.Recoverable || !strings.HasSuffix(p.Error(), "see docs/runbook.md#audit-torn") {
		t.Fatalf("torn last line: %+v", p)
	}
	before := snapshot(t, dir)
	if ab, err := AcceptBreak(dir, noon()); ab != nil || err != nil || !sameFiles(before, snapshot(t, dir)) {
		t.Fatalf("AcceptBreak(torn last line) = %+v, %v: a damaged last line is recovered, not accepted", ab, err)
	}
	// Days later: the recovery still goes in the latest file, after the
	// line it describes; the next record starts the new day's file.
	rec := reopen(t, dir, newClock("2026-09-25T10:00:00Z").opts())
	if rec == nil || rec.File != day2 || rec.Line != 7 || rec.Damage != Torn || rec.Action != EndedLine || rec.Seq != 12 {
		t.Fatalf("Recovered = %+v, want a torn, ended line at %s:7 recovered by seq 12", rec, day2)
	}
	if ls, _ := lines(t, filepath.Join(dir, day2)); len(ls) != 8 || !strings.Contains(ls[7], `"type":"recovery"`) {
		t.Errorf("the recovery is not the last line of %s: %d lines", day2, len(ls))
	}
	if ls, _ := lines(t, filepath.Join(dir, "2026-09-25.jsonl")); len(ls) != 1 {
		t.Errorf("2026-09-25.jsonl has %d lines, want the one decision", len(ls))
	}
	r := wantOK(t, dir)
	if !slices.Equal(r.Recovered, []string{day2 + ":7"}) || r.LastSeq != 13 || r.Records != 12 {
		t.Errorf("after recovery: %+v", r)
	}
	if len(r.Abandoned) != 0 {
		t.Errorf("the torn ask decision is tracked as abandoned: %v", r.Abandoned)
	}
	if rec := reopen(t, dir, noon()); rec != nil {
		t.Errorf("a second start recovered again: %+v", rec)
	}
	wantOK(t, dir)
}

// TestRecordCutBeforeNewline is the M3a case where a whole record was
// written but its newline was not: the record parses and its prev holds,
// and it must still be recovered, or the writer breaks its own chain.
func TestRecordCutBeforeNewline(t *testing.T) {
	dir := chainDir(t)
	truncate(t, dir, day2, 1)
	p := wantProblem(t, Verify(dir), day2+":7", "torn line")
	if !p.Recoverable {
		t.Fatalf("%v is not recoverable", p)
	}
	rec := reopen(t, dir, noon())
	if rec == nil || rec.Line != 7 || rec.Action != EndedLine {
		t.Fatalf("Recovered = %+v", rec)
	}
	r := wantOK(t, dir)
	if !slices.Equal(r.Recovered, []string{day2 + ":7"}) || len(r.Abandoned) != 0 {
		t.Errorf("after recovery: recovered %v, abandoned %v; the cut record is damage, not a decision", r.Recovered, r.Abandoned)
	}
	ls, torn := lines(t, filepath.Join(dir, day2))
	if torn || len(ls) != 9 || !strings.Contains(ls[7], `"type":"recovery"`) {
		t.Errorf("file after recovery: %d lines (torn %v), line 8 %q", len(ls), torn, ls[7])
	}
	reopen(t, dir, noon())
	wantOK(t, dir)
}

func TestUnparseableLastLine(t *testing.T) {
	for _, bad := range []string{
		"this is not json",
		"",
		`{"type":"decision","seq":999,"time":"2026-09-18T12:00:00.000000000Z"`,
	} {
		t.Run(bad, func(t *testing.T) {
			dir := chainDir(t)
			appendRaw(t, filepath.Join(dir, day2), bad+"\n")
			p := wantProblem(t, Verify(dir), day2+":8", "does not parse")
			if !p.Recoverable {
				t.Fatalf("%v is not recoverable", p)
			}
			rec := reopen(t, dir, noon())
			// The recovery's seq is counted from lines: a damaged line
			// claiming seq 999 does not choose it.
			if rec == nil || rec.Damage != Unparseable || rec.Action != NoAction || rec.Line != 8 || rec.Seq != 13 || rec.Size != int64(len(bad)) {
				t.Fatalf("Recovered = %+v", rec)
			}
			if r := wantOK(t, dir); r.LastSeq != 14 {
				t.Errorf("last seq %d, want 14", r.LastSeq)
			}
		})
	}
}

// TestTornOlderFileEmptyLatest: the day's file was created but never
// written, and the previous file ends in a torn line. The ordinary start
// checks the whole log (the previous file's last line does not parse),
// and the recovery goes in the latest file; the older file is not touched.
func TestTornOlderFileEmptyLatest(t *testing.T) {
	dir := chainDir(t)
	truncate(t, dir, day1, 50)
	if err := os.WriteFile(filepath.Join(dir, day2), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := fileBytes(t, filepath.Join(dir, day1))
	p := wantProblem(t, Verify(dir), day1+":4", "torn line")
	if !p.Recoverable {
		t.Fatalf("%v is not recoverable", p)
	}
	rec := reopen(t, dir, newClock("2026-09-18T08:00:00Z").opts())
	if rec == nil || rec.File != day1 || rec.Line != 4 || rec.Damage != Torn || rec.Action != NoAction || rec.Seq != 5 {
		t.Fatalf("Recovered = %+v", rec)
	}
	if string(fileBytes(t, filepath.Join(dir, day1))) != string(old) {
		t.Error("the older file was written to")
	}
	if ls, _ := lines(t, filepath.Join(dir, day2)); len(ls) != 2 || !strings.Contains(ls[0], `"type":"recovery"`) {
		t.Errorf("latest file = %q", ls)
	}
	wantOK(t, dir)
}

// TestBreakInOlderFileAccepted: the previous file's last line no longer
// parses, so an ordinary start checks the whole log and refuses; the owner
// accepts the break and every later start succeeds.
func TestBreakInOlderFileAccepted(t *testing.T) {
	dir := chainDir(t)
	edit(t, dir, day1, func(ls []string) []string { ls[3] = `{garbage}`; return ls })
	wantProblem(t, Verify(dir), day1+":4", "does not parse")
	_, err := Open(dir, noon())
	var p *Problem
	if !errors.As(err, &p) || p.Where() != day1+":4" || !strings.Contains(err.Error(), "see docs/runbook.md#audit-chain-broken") {
		t.Fatalf("Open = %v, want a refusal naming %s:4", err, day1)
	}
	lastGood := p.LastGood
	c := newClock("2026-09-25T10:00:00Z") // days later: the record still goes in the latest file
	ab, err := AcceptBreak(dir, c.opts())
	if err != nil || ab == nil {
		t.Fatalf("AcceptBreak = %+v, %v", ab, err)
	}
	if ab.File != day1 || ab.Line != 4 || ab.LastGood != lastGood || ab.Seq != 12 {
		t.Errorf("AcceptBreak wrote %+v, want %s:4, last_good %s, seq 12", ab, day1, lastGood)
	}
	if _, err := os.Stat(filepath.Join(dir, "2026-09-25.jsonl")); err == nil {
		t.Error("AcceptBreak opened a new file; it writes in the latest one")
	}
	for range 2 {
		reopen(t, dir, c.opts())
	}
	r := wantOK(t, dir)
	if len(r.Accepted) != 1 || r.Accepted[0] != (Accepted{File: day1, Line: 4, At: day2 + ":8"}) {
		t.Errorf("Accepted = %+v", r.Accepted)
	}
	if !strings.Contains(r.Summary(), "1 accepted breaks (first "+day1+":4)") {
		t.Errorf("Summary() = %q", r.Summary())
	}
	before := snapshot(t, dir)
	if ab, err := AcceptBreak(dir, c.opts()); ab != nil || err != nil || !sameFiles(before, snapshot(t, dir)) {
		t.Errorf("AcceptBreak with nothing to accept = %+v, %v, or it wrote", ab, err)
	}
}

const day3 = "2026-09-19.jsonl"

// threeDays is the fixture with a third day: an ask decided on day 2 and
// answered on day 3, then a call allowed and its result.
func threeDays(t *testing.T) string {
	t.Helper()
	dir := chainDir(t)
	w, err := Open(dir, newClock("2026-09-19T08:00:00Z").opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, r := range []Record{approve(11), result(11), allowed("s-4", "read_file"), result(14)} {
		if _, err := w.Append(r); err != nil {
			t.Fatalf("Append(%s): %v", r.Tag(), err)
		}
	}
	return dir
}

// TestResumedStartAcceptsOlderBreak is the decision log's case: a break in
// an older file, and another inside the region it opens, in a file an
// ordinary start checks. The full check accepts both with one record; an
// ordinary start must agree, or a correctly accepted break would stop
// every start while --accept-break says there is nothing to accept.
func TestResumedStartAcceptsOlderBreak(t *testing.T) {
	dir := threeDays(t)
	day3noon := newClock("2026-09-19T12:00:00Z").opts()
	edit(t, dir, day1, func(ls []string) []string {
		ls[1] = strings.Replace(ls[1], `"size":1234`, `"size":4321`, 1)
		return ls
	})
	// An ordinary start checks the latest two files: it does not see this.
	reopen(t, dir, day3noon)
	wantProblem(t, Verify(dir), day1+":3", "prev")
	edit(t, dir, day3, func(ls []string) []string {
		ls[1] = strings.Replace(ls[1], `"size":1234`, `"size":1235`, 1)
		return ls
	})
	if _, err := Open(dir, day3noon); err == nil || !strings.Contains(err.Error(), day3+":3") {
		t.Fatalf("Open = %v, want a refusal at %s:3", err, day3)
	}
	ab, err := AcceptBreak(dir, day3noon)
	if err != nil || ab == nil || ab.File != day1 || ab.Line != 3 {
		t.Fatalf("AcceptBreak = %+v, %v, want the first break, %s:3", ab, err, day1)
	}
	wantOK(t, dir)
	reopen(t, dir, day3noon)
	if ab, err := AcceptBreak(dir, day3noon); ab != nil || err != nil {
		t.Errorf("AcceptBreak = %+v, %v, want nothing to accept", ab, err)
	}
	if r := wantOK(t, dir); len(r.Accepted) != 1 || r.Accepted[0].At != day3+":6" {
		t.Errorf("Accepted = %+v", r.Accepted)
	}
}

// TestWriterChecksWhatItAnswers: an ordinary start tracks the decisions of
// the latest two files, so an approval for yesterday's ask is written, and
// a record naming a decision it did not read is refused, never written on
// trust.
func TestWriterChecksWhatItAnswers(t *testing.T) {
	dir := threeDays(t)
	w, err := Open(dir, newClock("2026-09-19T12:00:00Z").opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(result(10)); err != nil {
		t.Errorf("Append(result of a call allowed yesterday) = %v", err)
	}
	if _, err := w.Append(result(14)); err == nil || !strings.Contains(err.Error(), "which is not an allowed call awaiting its result") {
		t.Errorf("Append(second result) = %v", err)
	}
	if _, err := w.Append(result(1)); err == nil || !strings.Contains(err.Error(), "did not track") {
		t.Errorf("Append(result naming a decision in an older file) = %v", err)
	}
	w.Close()
	wantOK(t, dir)
}

// TestAcceptBreakEndsTornLine: a break, and a torn last line after it.
func TestAcceptBreakEndsTornLine(t *testing.T) {
	dir := chainDir(t)
	edit(t, dir, day2, func(ls []string) []string {
		ls[1] = strings.Replace(ls[1], `"exit":0`, `"exit":1`, 1)
		return ls
	})
	truncate(t, dir, day2, 30)
	wantProblem(t, Verify(dir), day2+":3", "prev")
	ab, err := AcceptBreak(dir, noon())
	if err != nil || ab == nil || ab.Line != 3 || ab.Seq != 13 {
		t.Fatalf("AcceptBreak = %+v, %v", ab, err)
	}
	ls, torn := lines(t, filepath.Join(dir, day2))
	if torn || len(ls) != 9 || !strings.Contains(ls[7], `"action":"ended_line"`) {
		t.Errorf("latest file: torn %v, lines %q", torn, ls)
	}
	r := wantOK(t, dir)
	if len(r.Accepted) != 1 || r.Accepted[0].At != day2+":9" {
		t.Errorf("Accepted = %+v", r.Accepted)
	}
	reopen(t, dir, noon())
	wantOK(t, dir)
}

// TestPreviousFileUnparseableChecksWholeLog: when the previous file ends
// in a line that does not parse, an ordinary start checks the whole log,
// so a break in the oldest file stops it, though the latest two files
// hold together on their own.
func TestPreviousFileUnparseableChecksWholeLog(t *testing.T) {
	dir := chainDir(t)
	appendRaw(t, filepath.Join(dir, day2), "garbage\n")
	if err := os.WriteFile(filepath.Join(dir, day3), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if rec := reopen(t, dir, newClock("2026-09-19T08:00:00Z").opts()); rec == nil || rec.File != day2 || rec.Line != 8 || rec.Action != NoAction {
		t.Fatalf("Recovered = %+v, want the garbage at %s:8 recorded in %s", rec, day2, day3)
	}
	wantOK(t, dir)
	edit(t, dir, day1, func(ls []string) []string {
		ls[1] = strings.Replace(ls[1], `"exit":0`, `"exit":7`, 1)
		return ls
	})
	if _, err := Open(dir, noon()); err == nil || !strings.Contains(err.Error(), day1+":3") {
		t.Errorf("Open = %v, want the whole log checked and a refusal at %s:3", err, day1)
	}
}

// TestEndTornLineChecksBytes: the one byte written outside jsonl is
// written only after the file's tail is checked against what was verified.
func TestEndTornLineChecksBytes(t *testing.T) {
	dir := chainDir(t)
	truncate(t, dir, day2, 10)
	p := Verify(dir).Problem
	w, err := load(dir, noon(), true)
	if err != nil || p == nil {
		t.Fatal(err, p)
	}
	truncate(t, dir, day2, 1) // the file changes after it was verified
	before := snapshot(t, dir)
	if err := w.endTornLine(w.v.last); err == nil || !strings.Contains(err.Error(), "changed since it was verified") {
		t.Errorf("endTornLine on a changed file = %v", err)
	}
	if !sameFiles(before, snapshot(t, dir)) {
		t.Error("endTornLine wrote to a file that changed")
	}
}

// TestAcceptedRegionReferences: records inside an accepted break are not
// tracked. The verifier takes a later reference to one on trust, as it
// cannot check it; the writer refuses to write one.
func TestAcceptedRegionReferences(t *testing.T) {
	dir := chainDir(t)
	edit(t, dir, day2, func(ls []string) []string {
		ls[1] = strings.Replace(ls[1], `"exit":0`, `"exit":3`, 1)
		return ls
	})
	if ab, err := AcceptBreak(dir, noon()); err != nil || ab == nil || ab.Line != 3 {
		t.Fatalf("AcceptBreak = %+v, %v", ab, err)
	}
	w, err := Open(dir, noon())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(result(10)); err == nil || !strings.Contains(err.Error(), "did not track") {
		t.Errorf("Append(result of a decision inside the accepted break) = %v", err)
	}
	w.Close()
	appendRaw(t, filepath.Join(dir, day2), craft(t, dir, result(10), 0, "")+"\n")
	if r := wantOK(t, dir); len(r.Unfinished) != 0 {
		t.Errorf("Unfinished = %v", r.Unfinished)
	}
}

// TestTornOlderFileNeedsTornRecovery: a line torn at the end of an older
// file is still torn (nothing was added to it); a recovery saying it was
// merely unparseable does not describe it.
func TestTornOlderFileNeedsTornRecovery(t *testing.T) {
	dir := chainDir(t)
	truncate(t, dir, day1, 50)
	if err := os.WriteFile(filepath.Join(dir, day2), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := Verify(dir)
	torn, _ := lines(t, filepath.Join(dir, day1))
	rec := &Recovery{File: day1, Line: 4, Damage: Unparseable, Action: NoAction, SHA256: r.Head, Size: int64(len(torn[3]))}
	appendRaw(t, filepath.Join(dir, day2), craft(t, dir, rec, 0, "")+"\n")
	wantProblem(t, Verify(dir), day1+":4", "torn line")
}

// TestResumedStartCountsOlderLines: with more files than an ordinary start
// reads, the lines before them are counted (a torn line at the end of an
// older file too) so that seq stays the position in the whole log.
func TestResumedStartCountsOlderLines(t *testing.T) {
	dir := chainDir(t)
	truncate(t, dir, day1, 50)
	if err := os.WriteFile(filepath.Join(dir, day2), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	reopen(t, dir, noon()) // day2: a recovery of day1's torn line, then a decision
	for _, day := range []string{"2026-09-19T08:00:00Z", "2026-09-20T08:00:00Z", "2026-09-20T09:00:00Z"} {
		reopen(t, dir, newClock(day).opts())
	}
	r := wantOK(t, dir)
	if r.Files != 4 || r.LastSeq != 9 {
		t.Errorf("Verify = %+v, want 4 files and 9 lines", r)
	}
	w, err := Open(dir, newClock("2026-09-20T10:00:00Z").opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if seq, _ := w.Head(); seq != 9 {
		t.Errorf("Head after an ordinary start = %d, want 9", seq)
	}
}

// TestResumedStartAgreesAfterOlderBreak: the whole check tracks nothing
// between an older break and the record accepting it, so a later record
// naming a decision in between is taken on trust; an ordinary start,
// which tracked those decisions, must take it on trust too.
func TestResumedStartAgreesAfterOlderBreak(t *testing.T) {
	dir := threeDays(t)
	edit(t, dir, day1, func(ls []string) []string {
		ls[1] = strings.Replace(ls[1], `"size":1234`, `"size":4321`, 1)
		return ls
	})
	if ab, err := AcceptBreak(dir, noon()); err != nil || ab == nil {
		t.Fatalf("AcceptBreak = %+v, %v", ab, err)
	}
	// A second result for decision 11, answered and run on day 3, inside
	// the accepted break.
	appendRaw(t, filepath.Join(dir, day3), craft(t, dir, result(11), 0, "")+"\n")
	wantOK(t, dir)
	if w, err := Open(dir, newClock("2026-09-19T12:00:00Z").opts()); err != nil {
		t.Errorf("Open = %v, but the whole check accepts the log", err)
	} else {
		w.Close()
	}
	// An approval for decision 10, which the ordinary start tracked as an
	// allowed call awaiting its result, and the whole check did not track.
	appendRaw(t, filepath.Join(dir, day3), craft(t, dir, approve(10), 0, "")+"\n")
	wantOK(t, dir)
	if w, err := Open(dir, newClock("2026-09-19T12:00:00Z").opts()); err != nil {
		t.Errorf("Open = %v, but the whole check accepts the log", err)
	} else {
		w.Close()
	}
}
