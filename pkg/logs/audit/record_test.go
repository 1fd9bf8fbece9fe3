package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/chain from writeChain")

// TestGolden is the record format: every golden file decodes strictly,
// passes ParseLine, and re-encodes to the same bytes; every record type
// has one (testdata/golden/<type>.json), and every file is of the type
// its name starts with.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/golden/*.json")
	covered := map[string]bool{}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := fileBytes(t, f)
			r, err := ParseLine(want)
			if err != nil {
				t.Fatalf("ParseLine(%s): %v", f, err)
			}
			if !strings.HasPrefix(filepath.Base(f), r.Tag()) {
				t.Errorf("%s holds a %s record", f, r.Tag())
			}
			covered[r.Tag()] = true
			got, err := records.Encode(r)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("Encode(ParseLine(golden)) = %s, %v\nwant %s", got, err, want)
			}
			line, err := encode(r)
			if err != nil || !bytes.Equal(line, want) {
				t.Errorf("encode (the bytes jsonl writes) = %s, %v\nwant %s", line, err, want)
			}
		})
	}
	for _, tag := range Tags() {
		if !covered[tag] {
			t.Errorf("record type %q has no golden file testdata/golden/%s.json", tag, tag)
		}
	}
}

func TestParseLineRefuses(t *testing.T) {
	good := string(fileBytes(t, "testdata/golden/decision.json"))
	swap := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("golden decision lacks %q", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	tests := []struct{ name, in, want string }{
		{"space after colon", swap(`"seq":`, `"seq": `), "not canonical"},
		{"keys reordered", swap(`"seq":3,"time":"2026-09-18T09:15:02.123456789Z"`, `"time":"2026-09-18T09:15:02.123456789Z","seq":3`), "not canonical"},
		{"escaped letter", swap(`"read_file"`, `"read\u005ffile"`), "not canonical"},
		{"unknown field", swap(`"untrusted":false`, `"untrusted":false,"x":1`), "unknown field"},
		{"field case", swap(`"untrusted"`, `"Untrusted"`), "case differs"},
		{"duplicate key", swap(`"taint":"private"`, `"taint":"private","taint":"secret"`), "duplicate key"},
		{"float seq", swap(`"seq":3`, `"seq":3.0`), "fraction"},
		{"seq zero", swap(`"seq":3`, `"seq":0`), "seq 0"},
		{"time not UTC", swap(`Z"`, `+00:00"`), "time"},
		{"time without nanoseconds", swap(`.123456789Z`, `Z`), "time"},
		{"time trimmed", swap(`.123456789Z`, `.12345678Z`), "time"},
		{"prev upper case", swap(`"prev":"3f1c`, `"prev":"3F1c`), "prev"},
		{"prev short", swap(`"prev":"3f1c`, `"prev":"3f1`), "prev"},
		{"reason on allowed", swap(`"outcome":"allowed"`, `"outcome":"allowed","reason":"no_grant"`), "a reason goes with a denial"},
		{"reason null", swap(`"outcome":"allowed"`, `"outcome":"allowed","reason":null`), "null"},
		{"reason empty", swap(`"outcome":"allowed"`, `"outcome":"allowed","reason":""`), "unknown denial reason"},
		{"unknown outcome", swap(`"allowed"`, `"maybe"`), "unknown outcome"},
		{"meta-tool", swap(`"read_file"`, `"call_tool"`), "target tool"},
		{"no arguments", swap(`"arguments":{"path":"/home/owner/notes.txt"},`, ``), "missing field"},
		{"public taint", swap(`"taint":"private"`, `"taint":"public"`), "taint"},
		{"unknown type", swap(`"type":"decision"`, `"type":"note"`), "unknown type"},
		{"trailing newline", good + "\n", "not canonical"},
		{"trailing data", good + "{}", "want an object"},
		{"leading space", " " + good, "not canonical"},
		{"not utf8", swap(`"s-1"`, "\"s-\xff\""), "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLine([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseLine(%s) = %v, want an error containing %q", tt.in, err, tt.want)
			}
		})
	}
}

// TestRecordRules covers the rules of each record type that no golden
// file shows, through the writer's own check (Validate on the record).
func TestRecordRules(t *testing.T) {
	long := strings.Repeat("é", MaxDetail+1)
	tests := []struct {
		name string
		r    Record
		want string
	}{
		{"detail too long", denied("s", NoGrant, long, nil), "over 300"},
		{"detail two lines", denied("s", NoGrant, "a\nb", nil), "control character"},
		{"detail line separator", denied("s", NoGrant, "a\u2028b", nil), "control character"},
		{"detail on allowed", func() Record { d := allowed("s", "t"); d.Record.Detail = "x"; return d }(), "only a denial"},
		{"no_grant with grant", denied("s", NoGrant, "", grantDeny), "no_grant denial names a grant"},
		{"deny_grant without grant", denied("s", DenyGrant, "", nil), "names no grant"},
		{"denied without reason", denied("s", "", "", nil), "a reason goes with a denial"},
		{"empty session", allowed("", "t"), "session is empty"},
		{"bad grant hash", func() Record { d := allowed("s", "t"); d.Record.Grant = &GrantRef{ID: "g", SHA256: "x"}; return d }(), "hex SHA-256"},
		{"approval of itself", &Approval{Seq: 5, Decision: 5, Answer: AnswerApproved, Verdict: Verdict{Outcome: Allowed, Taint: 2}}, "not an earlier record"},
		{"refused but allowed", &Approval{Seq: 5, Decision: 1, Answer: AnswerRefused, Verdict: Verdict{Outcome: Allowed, Taint: 2}}, "denied with reason refused"},
		{"approved re-decides ask", &Approval{Seq: 5, Decision: 1, Answer: AnswerApproved, Verdict: Verdict{Outcome: Ask, Taint: 2}}, "not ask"},
		{"result size", &Result{Seq: 5, Decision: 1, SHA256: outputHash, Size: -1, Class: 2}, "negative"},
		{"result class", &Result{Seq: 5, Decision: 1, SHA256: outputHash}, "class"},
		{"recovery of line 0", &Recovery{File: "2026-09-18.jsonl", Damage: Torn, Action: NoAction, SHA256: outputHash}, "line 0"},
		{"recovery file", &Recovery{File: "x.jsonl", Line: 1, Damage: Torn, Action: NoAction, SHA256: outputHash}, "not an audit log name"},
		{"unparseable ended", &Recovery{File: "2026-09-18.jsonl", Line: 1, Damage: Unparseable, Action: EndedLine, SHA256: outputHash}, "action none"},
		{"accepted_break hash", &AcceptedBreak{File: "2026-09-18.jsonl", Line: 1, LastGood: "00"}, "last_good"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.r.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("validate(%+v) = %v, want an error containing %q", tt.r, err, tt.want)
			}
		})
	}
	if err := denied("s", NoGrant, strings.Repeat("é", MaxDetail), nil).validate(); err != nil {
		t.Errorf("a detail of %d characters (%d bytes) is refused: %v", MaxDetail, 2*MaxDetail, err)
	}
	call := denied("s", InvalidArguments, "call_tool cannot call itself", nil)
	call.Record.Tool = "call_tool"
	if err := call.validate(); err != nil {
		t.Errorf("an invalid-arguments denial of call_tool naming itself must be recordable: %v", err)
	}
}

func TestIsLogName(t *testing.T) {
	for name, want := range map[string]bool{
		"2026-09-18.jsonl": true, "2024-02-29.jsonl": true, "2026-12-31.jsonl": true,
		"2026-02-30.jsonl": false, "2025-02-29.jsonl": false, "2026-13-01.jsonl": false,
		"2026-09-31.jsonl": false, "2026-00-10.jsonl": false, "2026-9-18.jsonl": false,
		"2026-09-18.json": false, "2026-09-18.jsonl.torn": false, "x2026-09-18.jsonl": false,
		"2026_09_18.jsonl": false, "+026-09-18.jsonl": false, "2026-09-1a.jsonl": false,
		"audit.jsonl": false, ".jsonl": false, "": false, "2026-09-18.JSONL": false,
	} {
		if got := IsLogName(name); got != want {
			t.Errorf("IsLogName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestChainFixture pins the writer's output byte for byte: writing the
// fixture's records with the fixture's clock gives the checked-in files,
// and Verify finds them intact with this head. Run with -update after a
// deliberate format change.
func TestChainFixture(t *testing.T) {
	dir := t.TempDir()
	writeChain(t, dir)
	if *update {
		os.RemoveAll("testdata/chain")
		os.MkdirAll("testdata/chain", 0o755)
		for name, b := range snapshot(t, dir) {
			os.WriteFile(filepath.Join("testdata/chain", name), b, 0o644)
		}
	}
	got, want := snapshot(t, dir), snapshot(t, "testdata/chain")
	if !sameFiles(got, want) {
		t.Fatalf("the writer's output differs from testdata/chain (run with -update if the change is deliberate)")
	}
	r := wantOK(t, "testdata/chain")
	if r.Files != 2 || r.Records != 11 || r.LastSeq != 11 || len(r.Accepted) != 0 || len(r.Recovered) != 0 {
		t.Errorf("Verify(chain) = %+v", r)
	}
	if !slices.Equal(r.Unfinished, []int64{10}) || !slices.Equal(r.Abandoned, []int64{11}) {
		t.Errorf("Verify(chain): unfinished %v, abandoned %v; want [10] and [11]", r.Unfinished, r.Abandoned)
	}
	wantSummary := "audit log intact: 2 files, 11 records, last seq 11, head " + r.Head +
		"; 1 allowed calls with no result (seq 10); 1 ask decisions with no answer (seq 11)"
	if r.Summary() != wantSummary {
		t.Errorf("Summary() = %q\nwant %q", r.Summary(), wantSummary)
	}
}

// TestHashRule checks the chain with a reading of the rule independent of
// the package: each line's prev is the hex SHA-256 of the previous line's
// bytes without its newline, across files in name order; the first is
// 64 zeros; seq counts lines from 1.
func TestHashRule(t *testing.T) {
	prev, seq := strings.Repeat("0", 64), int64(0)
	for _, f := range []string{"2026-09-17.jsonl", "2026-09-18.jsonl"} {
		ls, _ := lines(t, filepath.Join("testdata/chain", f))
		for i, l := range ls {
			seq++
			var h struct {
				Seq  int64  `json:"seq"`
				Prev string `json:"prev"`
			}
			if err := json.Unmarshal([]byte(l), &h); err != nil {
				t.Fatal(err)
			}
			if h.Prev != prev || h.Seq != seq {
				t.Errorf("%s:%d: seq %d prev %s, want seq %d prev %s", f, i+1, h.Seq, h.Prev, seq, prev)
			}
			sum := sha256.Sum256([]byte(l))
			prev = hex.EncodeToString(sum[:])
		}
	}
	if seq != 11 {
		t.Fatalf("fixture has %d lines", seq)
	}
	if r := Verify("testdata/chain"); r.Head != prev {
		t.Errorf("Verify head = %s, independent head = %s", r.Head, prev)
	}
}

// TestReasonsAppendOnly pins the denial reasons: old logs hold them, so a
// shipped reason is never renamed, removed or reordered, only appended
// (then append it to testdata/reasons.txt too).
func TestReasonsAppendOnly(t *testing.T) {
	pinned := strings.Fields(string(fileBytes(t, "testdata/reasons.txt")))
	got := make([]string, len(Reasons))
	for i, r := range Reasons {
		got[i] = string(r)
	}
	if !slices.Equal(got, pinned) {
		t.Errorf("Reasons = %q, testdata/reasons.txt pins %q", got, pinned)
	}
}
