package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// auditLog writes a small log through the real writer: an allowed call
// and its result, on one day.
func auditLog(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	now := time.Date(2026, 9, 18, 9, 0, 0, 0, time.UTC)
	w, err := audit.Open(dir, audit.Options{Now: func() time.Time { now = now.Add(time.Second); return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	seq, err := w.Append(&audit.Decision{Record: audit.DecisionRecord{
		Session: "s-1", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/home/owner/a"}`),
		Verdict: audit.Verdict{Outcome: audit.Allowed, Taint: dataclass.Private},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(&audit.Result{Decision: seq, SHA256: strings.Repeat("0a", 32), Size: 3, Class: dataclass.Private}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAuditVerifyIntact(t *testing.T) {
	dir := auditLog(t)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a log"), 0o600)
	code, out, stderr := run("audit", "verify", dir)
	if code != ExitOK || stderr != "" {
		t.Fatalf("audit verify = %d, %q, %q", code, out, stderr)
	}
	want := regexp.MustCompile(`^audit log intact: 1 files, 2 records, last seq 2, head [0-9a-f]{64}; ends at brokerd's head record \(seq 2\); no anchors \(bxctl audit anchor records one\)\n$`)
	if !want.MatchString(out) {
		t.Errorf("audit verify printed %q, want one summary line", out)
	}
}

func TestAuditVerifyTampered(t *testing.T) {
	dir := auditLog(t)
	p := filepath.Join(dir, "2026-09-18.jsonl")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), `/home/owner/a`, `/home/owner/b`, 1)), 0o600)
	code, out, _ := run("audit", "verify", dir)
	if code != ExitFailed {
		t.Fatalf("audit verify (tampered) = %d, %q", code, out)
	}
	if !strings.HasPrefix(out, p+":2: prev ") || !strings.HasSuffix(out, "; see docs/runbook.md#audit-chain-broken\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("audit verify printed %q, want %s:2: reason and a runbook pointer on one line", out, p)
	}
	after, _ := os.ReadFile(p)
	os.WriteFile(p, append(after, "torn"...), 0o600)
	if code, out, _ := run("audit", "verify", dir); code != ExitFailed || !strings.HasPrefix(out, p+":2: ") {
		t.Errorf("audit verify reports %q (%d), want the first break only", out, code)
	}
}

func TestAuditVerifyTorn(t *testing.T) {
	dir := auditLog(t)
	p := filepath.Join(dir, "2026-09-18.jsonl")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)-1], 0o600)
	code, out, _ := run("audit", "verify", dir)
	if code != ExitFailed || !strings.HasPrefix(out, p+":2: torn line") || !strings.Contains(out, "audit-torn") {
		t.Errorf("audit verify (torn) = %d, %q", code, out)
	}
}

// TestAuditVerifyEscapes: a reason can quote a key from the log; a
// terminal escape in it must reach the owner escaped, not obeyed.
func TestAuditVerifyEscapes(t *testing.T) {
	dir := auditLog(t)
	p := filepath.Join(dir, "2026-09-18.jsonl")
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"type":"decision","\u001b[2J":1}` + "\n{}\n")
	f.Close()
	code, out, _ := run("audit", "verify", dir)
	if code != ExitFailed || strings.ContainsRune(out, 0x1b) || !strings.Contains(out, `\u001b`) {
		t.Errorf("audit verify = %d, %q: the escape is not escaped", code, out)
	}
}

func TestAuditUsage(t *testing.T) {
	for _, args := range [][]string{
		{"audit"},
		{"audit", "check", "x"},
		{"audit", "verify"},
		{"audit", "verify", "a", "b"},
		{"audit", "verify", "-x", "a"},
	} {
		if code, out, stderr := run(args...); code != ExitUsage || out != "" || !strings.Contains(stderr, "usage: bxctl audit verify") {
			t.Errorf("bxctl %q = %d, %q, %q; want usage, exit 2", args, code, out, stderr)
		}
	}
	code, out, _ := run("audit", "verify", filepath.Join(t.TempDir(), "missing"))
	if code != ExitFailed || !strings.Contains(out, "see docs/runbook.md#audit-unreadable") {
		t.Errorf("audit verify (missing dir) = %d, %q", code, out)
	}
	if _, _, stderr := run(); !strings.Contains(stderr, "audit") {
		t.Errorf("bxctl usage does not list audit: %q", stderr)
	}
}
