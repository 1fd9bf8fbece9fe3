package audit

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	day1 = "2026-09-17.jsonl" // fixture lines 1-4
	day2 = "2026-09-18.jsonl" // fixture lines 5-11, the latest file
)

// craft encodes r as the line that would follow the log in dir, with the
// given seq and prev ("" for the right ones).
func craft(t *testing.T, dir string, r Record, seq int64, prev string) string {
	t.Helper()
	head := Verify(dir)
	if seq == 0 {
		seq = head.LastSeq + 1
	}
	if prev == "" {
		prev = head.Head
	}
	r.setHead(Header{Seq: seq, Time: "2026-09-18T12:00:00.000000000Z", Prev: prev})
	b, err := encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// edit rewrites line n (1-based) of file in dir with fn.
func edit(t *testing.T, dir, file string, fn func(ls []string) []string) {
	t.Helper()
	p := filepath.Join(dir, file)
	ls, _ := lines(t, p)
	writeLines(t, p, fn(ls))
}

func TestTampering(t *testing.T) {
	tests := []struct {
		name, file string
		fn         func(ls []string) []string
		where      string
		reason     string
	}{
		{"byte flipped in a middle record", day2, func(ls []string) []string {
			ls[1] = strings.Replace(ls[1], `"size":1234`, `"size":1235`, 1)
			return ls
		}, day2 + ":3", "prev"},
		{"byte flipped in a hash of a middle record", day1, func(ls []string) []string {
			ls[2] = strings.Replace(ls[2], `"prev":"b`, `"prev":"c`, 1)
			return ls
		}, day1 + ":3", "does not match the hash of the line before, " + day1 + ":2"},
		{"byte flipped so the record does not parse", day1, func(ls []string) []string {
			ls[1] = "[" + ls[1][1:]
			return ls
		}, day1 + ":2", "does not parse"},
		{"byte flipped in a file's last record", day1, func(ls []string) []string {
			ls[3] = strings.Replace(ls[3], "example.com", "examplf.com", 1)
			return ls
		}, day2 + ":1", "the line before, " + day1 + ":4"},
		{"line deleted", day2, func(ls []string) []string {
			return append(ls[:2:2], ls[3:]...)
		}, day2 + ":3", "prev"},
		{"first line deleted", day1, func(ls []string) []string {
			return ls[1:]
		}, day1 + ":1", "the start of the log"},
		{"two lines swapped", day2, func(ls []string) []string {
			ls[1], ls[2] = ls[2], ls[1]
			return ls
		}, day2 + ":2", "prev"},
		{"line duplicated", day2, func(ls []string) []string {
			return append(ls[:3:3], ls[2:]...)
		}, day2 + ":4", "prev"},
		{"seq disagrees with position", day2, func(ls []string) []string {
			ls[1] = strings.Replace(ls[1], `"seq":6,`, `"seq":60,`, 1)
			return ls
		}, day2 + ":2", "seq 60, but this is line 6 of the log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := chainDir(t)
			edit(t, dir, tt.file, tt.fn)
			before := snapshot(t, dir)
			p := wantProblem(t, Verify(dir), tt.where, tt.reason)
			if p.Recoverable || p.Unreadable {
				t.Errorf("problem %v is marked recoverable or unreadable", p)
			}
			if !strings.HasSuffix(p.Error(), "; see docs/runbook.md#audit-chain-broken") {
				t.Errorf("problem %q has no runbook pointer", p.Error())
			}
			if !sameFiles(before, snapshot(t, dir)) {
				t.Error("Verify wrote to the log")
			}
		})
	}
}

func TestAppendedRecords(t *testing.T) {
	last := day2 + ":8"
	tests := []struct {
		name   string
		line   func(dir string) string
		reason string
	}{
		{"wrong prev", func(dir string) string {
			return craft(t, dir, allowed("s", "t"), 0, Genesis)
		}, "prev " + Genesis + " does not match"},
		{"seq ahead of its position", func(dir string) string {
			return craft(t, dir, allowed("s", "t"), 13, "")
		}, "seq 13, but this is line 12"},
		{"seq repeated", func(dir string) string {
			return craft(t, dir, allowed("s", "t"), 11, "")
		}, "seq 11, but this is line 12"},
		{"result for a denied call", func(dir string) string {
			return craft(t, dir, result(4), 0, "")
		}, "result names decision 4, which is not an allowed call awaiting its result"},
		{"second result", func(dir string) string {
			return craft(t, dir, result(1), 0, "")
		}, "result names decision 1"},
		{"result for an unanswered ask", func(dir string) string {
			return craft(t, dir, result(11), 0, "")
		}, "which is an ask decision awaiting an answer"},
		{"approval of an allowed call", func(dir string) string {
			return craft(t, dir, approve(10), 0, "")
		}, "approval names decision 10, which is an allowed call"},
		{"second approval", func(dir string) string {
			return craft(t, dir, approve(8), 0, "")
		}, "approval names decision 8, which is not an ask decision"},
		{"recovery of a good line", func(dir string) string {
			return craft(t, dir, &Recovery{File: day2, Line: 7, Damage: Unparseable, Action: NoAction, SHA256: Verify(dir).Head, Size: int64(len(lastOf(t, dir)))}, 0, "")
		}, "recovery describes no line: " + day2 + ":7 is a complete line that parses"},
		{"recovery naming another line", func(dir string) string {
			return craft(t, dir, &Recovery{File: day2, Line: 6, Damage: Torn, Action: EndedLine, SHA256: Verify(dir).Head, Size: 1}, 0, "")
		}, "recovery describes no line: it names " + day2 + ":6"},
		{"accepted_break with no break", func(dir string) string {
			return craft(t, dir, &AcceptedBreak{File: day1, Line: 2, LastGood: Genesis}, 0, "")
		}, "there is no break to accept"},
		{"not a record", func(string) string { return `{"type":"decision"}` }, "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := chainDir(t)
			appendRaw(t, filepath.Join(dir, day2), tt.line(dir)+"\n"+lastOf(t, dir)+"\n")
			// The bad line is followed by a copy of a good one, so it is
			// not the last line, which a writer would recover.
			p := wantProblem(t, Verify(dir), last, tt.reason)
			if p.Recoverable {
				t.Errorf("a bad line in the middle is marked recoverable: %v", p)
			}
			// An ordinary start checks the latest file only, taking
			// references into older files on trust; it may find the
			// break a line later, but it refuses to start.
			if _, err := Open(dir, Options{noHead: true}); err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#audit-chain-broken") {
				t.Errorf("Open = %v, want a refusal", err)
			}
		})
	}
}

func lastOf(t *testing.T, dir string) string {
	ls, _ := lines(t, filepath.Join(dir, day2))
	return ls[len(ls)-1]
}

func TestOtherFilesIgnored(t *testing.T) {
	dir := chainDir(t)
	want := Verify(dir).Summary()
	for name, body := range map[string]string{
		"notes.txt":              "not a log",
		day2 + ".torn":           "{garbage",
		"audit.jsonl":            "{garbage}\n",
		"2026-02-30.jsonl":       "{garbage}\n",
		"2026-9-19.jsonl":        "{garbage}\n",
		"2026-09-19.jsonl~":      "{garbage}\n",
		".2026-09-19.jsonl.swap": "{garbage}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "2026-09-19"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := wantOK(t, dir).Summary(); got != want {
		t.Errorf("Verify with other files = %q, want %q", got, want)
	}
	// 2026-02-30 sorts after every real file: a writer treating it as the
	// latest file would append after garbage.
	w, err := Open(dir, newClock("2026-09-18T13:00:00Z").opts())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := w.Append(allowed("s", "t")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if b := fileBytes(t, filepath.Join(dir, "2026-02-30.jsonl")); string(b) != "{garbage}\n" {
		t.Errorf("the writer appended to 2026-02-30.jsonl: %q", b)
	}
	if r := wantOK(t, dir); r.LastSeq != 12 {
		t.Errorf("after one append: last seq %d, want 12", r.LastSeq)
	}
}

func TestUnreadable(t *testing.T) {
	r := Verify(filepath.Join(t.TempDir(), "missing"))
	if r.Problem == nil || !r.Problem.Unreadable || !strings.Contains(r.Problem.Error(), "see docs/runbook.md#audit-unreadable") {
		t.Errorf("Verify(missing dir) = %+v", r.Problem)
	}
	dir := chainDir(t)
	if err := os.Symlink(filepath.Join(dir, day2), filepath.Join(dir, "2026-09-19.jsonl")); err != nil {
		t.Fatal(err)
	}
	r = Verify(dir)
	if r.Problem == nil || !r.Problem.Unreadable || !strings.Contains(r.Problem.Reason, "2026-09-19.jsonl is not a regular file") {
		t.Errorf("Verify(dir with a linked log name) = %+v", r.Problem)
	}
	if _, err := Open(dir, Options{noHead: true}); err == nil || !strings.Contains(err.Error(), "audit-unreadable") {
		t.Errorf("Open(dir with a linked log name) = %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing"), Options{}); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("Open(missing dir) = %v", err)
	}
	if _, err := Open(filepath.Join(dir, day2), Options{}); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("Open(a file) = %v", err)
	}
}

func TestLongLine(t *testing.T) {
	dir := chainDir(t)
	p := filepath.Join(dir, day2)
	appendRaw(t, p, strings.Repeat("x", MaxLine+10)+"\n"+lastOf(t, dir)+"\n")
	wantProblem(t, Verify(dir), day2+":8", "over the limit")
	// As the last line, it is damage like any other: recovered.
	dir = chainDir(t)
	appendRaw(t, filepath.Join(dir, day2), strings.Repeat("x", MaxLine+10)+"\n")
	p2 := wantProblem(t, Verify(dir), day2+":8", "over the limit")
	if !p2.Recoverable {
		t.Fatalf("a long last line is not recoverable: %v", p2)
	}
	w, err := Open(dir, Options{noHead: true})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if r := wantOK(t, dir); r.Recovered[0] != day2+":8" {
		t.Errorf("Recovered = %v", r.Recovered)
	}
}

func TestEmptyLog(t *testing.T) {
	dir := t.TempDir()
	r := wantOK(t, dir)
	if r.Files != 0 || r.LastSeq != 0 || r.Head != Genesis {
		t.Errorf("Verify(empty) = %+v", r)
	}
	if err := os.WriteFile(filepath.Join(dir, day1), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := wantOK(t, dir); r.Files != 1 || r.LastSeq != 0 {
		t.Errorf("Verify(one empty file) = %+v", r)
	}
}

// TestAcceptedBreakMustMatch: inside a failed region only an
// accepted_break naming the break's file, line and last_good, with its own
// seq and prev right, closes it.
func TestAcceptedBreakMustMatch(t *testing.T) {
	broken := func(t *testing.T) (string, *Problem) {
		dir := chainDir(t)
		edit(t, dir, day2, func(ls []string) []string {
			ls[1] = strings.Replace(ls[1], `"size":1234`, `"size":1`, 1)
			return ls
		})
		return dir, wantProblem(t, Verify(dir), day2+":3", "prev")
	}
	tests := []struct {
		name string
		ab   func(p *Problem) (*AcceptedBreak, int64, string)
	}{
		{"wrong last_good", func(p *Problem) (*AcceptedBreak, int64, string) {
			return &AcceptedBreak{File: p.File, Line: p.Line, LastGood: Genesis}, 0, ""
		}},
		{"wrong line", func(p *Problem) (*AcceptedBreak, int64, string) {
			return &AcceptedBreak{File: p.File, Line: p.Line + 1, LastGood: p.LastGood}, 0, ""
		}},
		{"wrong file", func(p *Problem) (*AcceptedBreak, int64, string) {
			return &AcceptedBreak{File: day1, Line: p.Line, LastGood: p.LastGood}, 0, ""
		}},
		{"wrong seq", func(p *Problem) (*AcceptedBreak, int64, string) {
			return &AcceptedBreak{File: p.File, Line: p.Line, LastGood: p.LastGood}, 99, ""
		}},
		{"wrong prev", func(p *Problem) (*AcceptedBreak, int64, string) {
			return &AcceptedBreak{File: p.File, Line: p.Line, LastGood: p.LastGood}, 0, p.LastGood
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, p := broken(t)
			ab, seq, prev := tt.ab(p)
			appendRaw(t, filepath.Join(dir, day2), craft(t, dir, ab, seq, prev)+"\n")
			wantProblem(t, Verify(dir), day2+":3", "prev")
		})
	}
	dir, p := broken(t)
	appendRaw(t, filepath.Join(dir, day2), craft(t, dir, &AcceptedBreak{File: p.File, Line: p.Line, LastGood: p.LastGood}, 0, "")+"\n")
	if r := wantOK(t, dir); len(r.Accepted) != 1 {
		t.Errorf("Accepted = %+v", r.Accepted)
	}
}

// TestRecoveryMustMatch: a recovery recovers the line before it only if it
// describes that line truly: file, line, hash, size, and what it was.
func TestRecoveryMustMatch(t *testing.T) {
	const garbage = "garbage"
	sum := hashHex(sha256Of(garbage))
	right := Recovery{File: day2, Line: 8, Damage: Unparseable, Action: NoAction, SHA256: sum, Size: int64(len(garbage))}
	for _, tt := range []struct {
		name string
		edit func(r *Recovery)
		ok   bool
	}{
		{"matching", func(*Recovery) {}, true},
		{"wrong hash", func(r *Recovery) { r.SHA256 = outputHash }, false},
		{"wrong size", func(r *Recovery) { r.Size++ }, false},
		{"claims torn", func(r *Recovery) { r.Damage = Torn }, false},
		// Once a newline is added, a torn line looks like any other: the
		// bytes are bound by the hash, and whether it parses is moot.
		{"claims a newline was added", func(r *Recovery) { r.Damage, r.Action = Torn, EndedLine }, true},
		{"names the next file", func(r *Recovery) { r.File = "2026-09-19.jsonl" }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := chainDir(t)
			p := filepath.Join(dir, day2)
			appendRaw(t, p, garbage+"\n")
			r := right
			tt.edit(&r)
			// craft chains from the garbage line, as a writer would.
			appendRaw(t, p, craft(t, dir, &r, 13, sum)+"\n")
			got := Verify(dir)
			if tt.ok {
				if !got.OK() || len(got.Recovered) != 1 {
					t.Errorf("Verify = %v, recovered %v", got.Problem, got.Recovered)
				}
				return
			}
			wantProblem(t, got, day2+":8", "does not parse")
		})
	}
}

func sha256Of(s string) [32]byte { return sha256.Sum256([]byte(s)) }
