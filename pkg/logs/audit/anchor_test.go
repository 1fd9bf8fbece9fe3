package audit

import (
	"strings"
	"testing"
	"time"
)

// TestAnchorsOutliveTheHead: a writer with brokerd's uid can rewrite the
// head record too; the owner's anchors still name what was removed or
// rewritten.
func TestAnchorsOutliveTheHead(t *testing.T) {
	at := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	dir, _ := headed(t)
	e := VerifyEnd(dir, nil)
	if !e.OK() {
		t.Fatalf("VerifyEnd = %+v", e)
	}
	end := NewAnchor("/state/audit", e.Report, at)
	mid := Anchor{Log: end.Log, Seq: 4, Time: end.Time}
	mid.Hash, _ = func() (string, bool) {
		v := newVerifier()
		v.keep(4)
		files, _ := listLogs(dir)
		v.run(&source{dir: dir, files: files})
		return v.hashAt(4)
	}()
	if e := VerifyEnd(dir, []Anchor{mid, end}); !e.OK() || e.Anchors != 2 {
		t.Fatalf("VerifyEnd(intact, 2 anchors) = %+v", e)
	}

	// Drop the newest record, then make the head record agree.
	drop(t, dir)
	if _, _, err := AdoptHead(dir, at); err != nil {
		t.Fatal(err)
	}
	e = VerifyEnd(dir, []Anchor{mid, end})
	if e.HeadProblem != nil || len(e.AnchorProblems) != 1 || !e.AnchorProblems[0].PastEnd ||
		!strings.HasSuffix(e.AnchorProblems[0].Error(), "see docs/runbook.md#audit-anchor-past-end") {
		t.Fatalf("VerifyEnd(dropped, head adopted) = %+v, want the end anchor past the end", e)
	}

	// Re-chain from record 3, then make the head record agree.
	rechain(t, dir, func(pos int64, r Record) {
		if d, ok := r.(*Decision); ok && pos == 3 {
			d.Record.Untrusted = false
		}
	})
	if _, _, err := AdoptHead(dir, at); err != nil {
		t.Fatal(err)
	}
	e = VerifyEnd(dir, []Anchor{mid, end})
	if !e.Report.OK() || e.HeadProblem != nil || len(e.AnchorProblems) != 2 || e.AnchorProblems[0].PastEnd ||
		!strings.HasSuffix(e.AnchorProblems[0].Error(), "see docs/runbook.md#audit-anchor-differs") {
		t.Fatalf("VerifyEnd(re-chained, head adopted) = %+v, want the mid anchor to differ", e)
	}
}

func TestParseAnchors(t *testing.T) {
	a := Anchor{Log: "/var/lib/boxmaker/audit", Seq: 7, Hash: strings.Repeat("ab", 32), Time: "2026-09-18T12:00:00.000000000Z"}
	line, err := a.Line()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseAnchors([]byte(string(line) + "\n" + string(line) + "\n"))
	if err != nil || len(got) != 2 || got[1] != a {
		t.Fatalf("ParseAnchors = %+v, %v", got, err)
	}
	if got, err := ParseAnchors(nil); err != nil || got != nil {
		t.Fatalf("ParseAnchors(empty) = %+v, %v", got, err)
	}
	for _, bad := range []string{
		string(line),
		string(line) + "\n\n",
		strings.Replace(string(line), "/var/lib", "var/lib", 1) + "\n",
		strings.Replace(string(line), `"seq":7`, `"seq":0`, 1) + "\n",
		strings.Replace(string(line), "ab", "AB", 1) + "\n",
		strings.Replace(string(line), ".000000000Z", "Z", 1) + "\n",
		strings.Replace(string(line), `"seq":7`, `"seq":7,"x":1`, 1) + "\n",
	} {
		if _, err := ParseAnchors([]byte(bad)); err == nil {
			t.Errorf("ParseAnchors(%q) succeeded", bad)
		}
	}
}

// FuzzParseAnchors: the owner's file may be edited by hand; what parses
// re-encodes to the same lines.
func FuzzParseAnchors(f *testing.F) {
	f.Add([]byte(`{"log":"/s/audit","seq":1,"hash":"` + strings.Repeat("0a", 32) + `","time":"2026-09-18T12:00:00.000000000Z"}` + "\n"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		as, err := ParseAnchors(b)
		if err != nil {
			return
		}
		var out []byte
		for _, a := range as {
			line, err := a.Line()
			if err != nil {
				t.Fatal(err)
			}
			out = append(append(out, line...), '\n')
		}
		if string(out) != string(b) {
			t.Fatalf("ParseAnchors(%q) re-encodes as %q", b, out)
		}
	})
}
