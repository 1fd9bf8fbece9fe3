package audit

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// headed writes the fixture chain with the head record kept, as brokerd
// writes it, and returns its directory (a subdirectory, so that its head
// file lies in the test's own temporary directory).
func headed(t *testing.T) (dir string, c *clock) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c = newClock("2026-09-17T23:59:56Z")
	w, err := Open(dir, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	read, err := w.Append(allowed("s-1", "read_file"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{result(read), ask("s-1"), denied("s-2", NoGrant, "no grant", nil), allowed("s-2", "read_file"), ask("s-3")} {
		if _, err := w.Append(r); err != nil {
			t.Fatalf("Append(%s): %v", r.Tag(), err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := listLogs(dir); len(files) != 2 {
		t.Fatalf("the fixture should span two days, got %v", files)
	}
	return dir, c
}

func headOf(t *testing.T, dir string) Head {
	t.Helper()
	h, err := ReadHead(HeadPath(dir))
	if err != nil || h == nil {
		t.Fatalf("readHead = %v, %v", h, err)
	}
	return *h
}

func wantHeadError(t *testing.T, err error, kind HeadKind, anchor string) {
	t.Helper()
	var he *HeadError
	if !errors.As(err, &he) || he.Kind != kind || !strings.HasSuffix(err.Error(), "see docs/runbook.md#"+anchor) {
		t.Fatalf("err = %v, want a HeadError pointing at %s", err, anchor)
	}
}

// rechain rewrites every line of the log from the files' records, after
// edit has changed one, with every seq and prev made right again: the
// forgery a chain alone cannot see.
func rechain(t *testing.T, dir string, edit func(pos int64, r Record)) {
	t.Helper()
	files, err := listLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var prev [32]byte
	var pos int64
	for _, f := range files {
		ls, _ := lines(t, filepath.Join(dir, f))
		for i, l := range ls {
			r, err := ParseLine([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			pos++
			edit(pos, r)
			r.setHead(Header{Seq: pos, Time: r.Head().Time, Prev: hashHex(prev)})
			b, err := encode(r)
			if err != nil {
				t.Fatal(err)
			}
			ls[i], prev = string(b), sha256.Sum256(b)
		}
		writeLines(t, filepath.Join(dir, f), ls)
	}
}

// forge appends a well-chained decision to the last file.
func forge(t *testing.T, dir string) {
	t.Helper()
	r := Verify(dir)
	d := denied("s-9", NoGrant, "forged", nil)
	d.setHead(Header{Seq: r.LastSeq + 1, Time: "2026-09-18T12:00:00.000000000Z", Prev: r.Head})
	b, err := encode(d)
	if err != nil {
		t.Fatal(err)
	}
	appendRaw(t, filepath.Join(dir, day2), string(b)+"\n")
}

// TestHeadCatchesWhatTheChainCannot: each of the four edits an attack run
// made (issue 13 item 2) passes the chain check alone, and brokerd now
// refuses to start on it.
func TestHeadCatchesWhatTheChainCannot(t *testing.T) {
	for _, tt := range []struct {
		name   string
		edit   func(t *testing.T, dir string)
		kind   HeadKind
		anchor string
	}{
		{"drop the newest record", func(t *testing.T, dir string) {
			ls, _ := lines(t, filepath.Join(dir, day2))
			writeLines(t, filepath.Join(dir, day2), ls[:len(ls)-1])
		}, HeadTruncated, "audit-truncated"},
		{"delete the newest day's file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, day2)); err != nil {
				t.Fatal(err)
			}
		}, HeadTruncated, "audit-truncated"},
		{"delete every day's file", func(t *testing.T, dir string) {
			for _, f := range []string{day1, day2} {
				if err := os.Remove(filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
		}, HeadTruncated, "audit-truncated"},
		{"append a well-chained forged record", forge, HeadDiffers, "audit-head-differs"},
		{"re-chain from an edited record", func(t *testing.T, dir string) {
			rechain(t, dir, func(pos int64, r Record) {
				if d, ok := r.(*Decision); ok && pos == 4 {
					d.Record.Detail = "edited"
				}
			})
		}, HeadDiffers, "audit-head-differs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, c := headed(t)
			tt.edit(t, dir)
			if r := Verify(dir); !r.OK() {
				t.Fatalf("the chain alone should pass the edit, got %v", r.Problem)
			}
			_, err := Open(dir, Options{Now: c.Now})
			wantHeadError(t, err, tt.kind, tt.anchor)
			if e := VerifyEnd(dir, nil); e.OK() || e.HeadProblem == nil {
				t.Fatalf("VerifyEnd = %+v, want the head problem", e)
			}
			_, err = AcceptBreak(dir, Options{Now: c.Now})
			if err != nil {
				t.Fatalf("AcceptBreak (no break to accept) = %v", err)
			}
		})
	}
}

// TestHeadCrashWindows: the states a crash during an append leaves are
// accepted, and Open settles the head record on the log's end.
func TestHeadCrashWindows(t *testing.T) {
	for _, tt := range []struct {
		name string
		// crash turns an intact log into what a crash at one point of
		// the last append left, and returns the head record then.
		crash     func(t *testing.T, dir string, last string, before Head) Head
		recovered bool
		err       string
	}{
		{name: "before the line was written", crash: func(t *testing.T, dir, last string, before Head) Head {
			drop(t, dir)
			return Head{Seq: before.Seq, Hash: before.Hash, Next: hashHex(sha256.Sum256([]byte(last)))}
		}},
		{name: "after the line, before the head", crash: func(t *testing.T, dir, last string, before Head) Head {
			return Head{Seq: before.Seq, Hash: before.Hash, Next: hashHex(sha256.Sum256([]byte(last)))}
		}},
		{name: "in the middle of the line", recovered: true, crash: func(t *testing.T, dir, last string, before Head) Head {
			drop(t, dir)
			appendRaw(t, filepath.Join(dir, day2), last[:len(last)/2])
			return Head{Seq: before.Seq, Hash: before.Hash, Next: hashHex(sha256.Sum256([]byte(last)))}
		}},
		{name: "another line where brokerd wrote", err: "the line brokerd was writing there", crash: func(t *testing.T, dir, last string, before Head) Head {
			drop(t, dir)
			forge(t, dir)
			return Head{Seq: before.Seq, Hash: before.Hash, Next: hashHex(sha256.Sum256([]byte(last)))}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, c := headed(t)
			ls, _ := lines(t, filepath.Join(dir, day2))
			last := ls[len(ls)-1]
			end := headOf(t, dir)
			before := Head{Seq: end.Seq - 1, Hash: hashHex(sha256.Sum256([]byte(ls[len(ls)-2])))}
			if err := WriteHead(HeadPath(dir), tt.crash(t, dir, last, before)); err != nil {
				t.Fatal(err)
			}
			w, err := Open(dir, Options{Now: c.Now})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Open = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open after a crash %s = %v", tt.name, err)
			}
			if (w.Recovered() != nil) != tt.recovered {
				t.Fatalf("Recovered = %+v, want recovered %v", w.Recovered(), tt.recovered)
			}
			seq, hash := w.Head()
			w.Close()
			if h := headOf(t, dir); h != (Head{Seq: seq, Hash: hash}) {
				t.Fatalf("head record after Open = %+v, want the log's end %d %s", h, seq, hash)
			}
			if e := VerifyEnd(dir, nil); !e.OK() {
				t.Fatalf("VerifyEnd = %+v", e)
			}
		})
	}
}

// drop removes the last line of the newest file.
func drop(t *testing.T, dir string) {
	t.Helper()
	ls, _ := lines(t, filepath.Join(dir, day2))
	writeLines(t, filepath.Join(dir, day2), ls[:len(ls)-1])
}

// TestHeadKeptOnEveryAppend: after every append the record names the
// line just written, with nothing under way.
func TestHeadKeptOnEveryAppend(t *testing.T) {
	dir, c := headed(t)
	w, err := Open(dir, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range 3 {
		if _, err := w.Append(denied("s-4", NoGrant, "", nil)); err != nil {
			t.Fatal(err)
		}
		seq, hash := w.Head()
		if h := headOf(t, dir); h != (Head{Seq: seq, Hash: hash}) {
			t.Fatalf("head record = %+v, want %d %s", h, seq, hash)
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".audit.head.*")); len(matches) != 0 {
		t.Fatalf("temporary head files left behind: %v", matches)
	}
}

func TestHeadMissingOrUnreadable(t *testing.T) {
	dir, c := headed(t)
	if err := os.Remove(HeadPath(dir)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{Now: c.Now})
	wantHeadError(t, err, HeadMissing, "audit-head-missing")
	if err := os.WriteFile(HeadPath(dir), []byte("{\"seq\":1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{Now: c.Now})
	wantHeadError(t, err, HeadMissing, "audit-head-missing")
	// An empty log with no record is a first start.
	empty := filepath.Join(t.TempDir(), "audit")
	os.Mkdir(empty, 0o700)
	w, err := Open(empty, Options{})
	if err != nil {
		t.Fatalf("Open(new log) = %v", err)
	}
	w.Close()
}

// TestAdoptHead: the owner's deliberate recovery takes the log as it is,
// keeps the old record, and brokerd starts again.
func TestAdoptHead(t *testing.T) {
	dir, c := headed(t)
	before := headOf(t, dir)
	drop(t, dir)
	if _, err := Open(dir, Options{Now: c.Now}); err == nil {
		t.Fatal("Open after dropping a record succeeded")
	}
	old, now, err := AdoptHead(dir, time.Date(2026, 9, 19, 8, 0, 0, 0, time.UTC))
	if err != nil || old == nil || *old != before || now.Seq != before.Seq-1 {
		t.Fatalf("AdoptHead = %+v, %+v, %v", old, now, err)
	}
	kept, err := os.ReadFile(HeadPath(dir) + ".replaced-20260919T080000.000000000Z")
	if err != nil || !strings.Contains(string(kept), before.Hash) {
		t.Fatalf("old head record not kept: %q, %v", kept, err)
	}
	w, err := Open(dir, Options{Now: c.Now})
	if err != nil {
		t.Fatalf("Open after AdoptHead = %v", err)
	}
	w.Close()
}

// TestAcceptBreakNeedsTheHead: accepting a break in a log whose end was
// also removed would record the removal as good; it is refused.
func TestAcceptBreakNeedsTheHead(t *testing.T) {
	dir, c := headed(t)
	ls, _ := lines(t, filepath.Join(dir, day1))
	ls[0] = strings.Replace(ls[0], "s-1", "s-X", 1)
	writeLines(t, filepath.Join(dir, day1), ls)
	drop(t, dir)
	_, err := AcceptBreak(dir, Options{Now: c.Now})
	wantHeadError(t, err, HeadTruncated, "audit-truncated")
}

func TestParseHead(t *testing.T) {
	good := "{\"seq\":3,\"hash\":\"" + strings.Repeat("ab", 32) + "\"}\n"
	if h, err := ParseHead([]byte(good)); err != nil || h.Seq != 3 {
		t.Fatalf("ParseHead(good) = %+v, %v", h, err)
	}
	for _, bad := range []string{
		strings.TrimSuffix(good, "\n"),
		"{\"seq\":3,\"hash\":\"" + strings.Repeat("AB", 32) + "\"}\n",
		"{\"seq\":-1,\"hash\":\"" + strings.Repeat("ab", 32) + "\"}\n",
		"{\"seq\":0,\"hash\":\"" + strings.Repeat("ab", 32) + "\"}\n",
		"{\"hash\":\"" + strings.Repeat("ab", 32) + "\",\"seq\":3}\n",
		"{\"seq\":3,\"hash\":\"" + strings.Repeat("ab", 32) + "\",\"next\":\"x\"}\n",
		"{\"seq\":3,\"hash\":\"" + strings.Repeat("ab", 32) + "\",\"extra\":1}\n",
		"{\"seq\":3, \"hash\":\"" + strings.Repeat("ab", 32) + "\"}\n",
	} {
		if _, err := ParseHead([]byte(bad)); err == nil {
			t.Errorf("ParseHead(%q) succeeded", bad)
		}
	}
}

// FuzzParseHead: whatever a head file holds, what parses re-encodes to
// the same bytes.
func FuzzParseHead(f *testing.F) {
	f.Add([]byte("{\"seq\":3,\"hash\":\"" + strings.Repeat("ab", 32) + "\",\"next\":\"" + strings.Repeat("cd", 32) + "\"}\n"))
	f.Add([]byte("{\"seq\":0,\"hash\":\"" + Genesis + "\"}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHead(b)
		if err != nil {
			return
		}
		again, err := h.encode()
		if err != nil || string(again) != string(b) {
			t.Fatalf("ParseHead(%q) = %+v, which encodes as %q", b, h, again)
		}
	})
}
