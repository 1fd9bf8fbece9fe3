package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
)

func sum(s string) string { b := sha256.Sum256([]byte(s)); return hex.EncodeToString(b[:]) }

// logLines reads the fixture's one day file.
func logLines(t *testing.T, dir string) (string, []string) {
	t.Helper()
	p := filepath.Join(dir, "2026-09-18.jsonl")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func writeLog(t *testing.T, p string, ls []string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAuditAnchorAndVerify: the four edits an attack run made to the log
// (issue 13 item 2) all passed `bxctl audit verify`; each now fails it,
// by brokerd's head record or, where a writer with brokerd's uid also
// made the head agree, by the owner's anchor.
func TestAuditAnchorAndVerify(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(t *testing.T, dir string)
		// adopt makes brokerd's head record agree, as a writer with
		// brokerd's uid could.
		adopt bool
		want  string
	}{
		{name: "drop the newest record", want: "see docs/runbook.md#audit-truncated", edit: func(t *testing.T, dir string) {
			p, ls := logLines(t, dir)
			writeLog(t, p, ls[:1])
		}},
		{name: "drop the newest record, head rewritten", adopt: true, want: "see docs/runbook.md#audit-anchor-past-end", edit: func(t *testing.T, dir string) {
			p, ls := logLines(t, dir)
			writeLog(t, p, ls[:1])
		}},
		{name: "delete the day file", want: "see docs/runbook.md#audit-truncated", edit: func(t *testing.T, dir string) {
			p, _ := logLines(t, dir)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "append a well-chained forged record after the anchor", want: "see docs/runbook.md#audit-head-differs", edit: func(t *testing.T, dir string) {
			p, ls := logLines(t, dir)
			forged := strings.Replace(strings.Replace(ls[0], `"seq":1,`, `"seq":3,`, 1), audit.Genesis, sum(ls[1]), 1)
			writeLog(t, p, append(ls, forged))
		}},
		{name: "re-chain from an edited record, head rewritten", adopt: true, want: "see docs/runbook.md#audit-anchor-differs", edit: func(t *testing.T, dir string) {
			p, ls := logLines(t, dir)
			edited := strings.Replace(ls[0], "/home/owner/a", "/home/owner/b", 1)
			ls[1] = strings.Replace(ls[1], sum(ls[0]), sum(edited), 1)
			ls[0] = edited
			writeLog(t, p, ls)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := auditLog(t)
			anchors := filepath.Join(t.TempDir(), "owner", "anchors.jsonl")
			code, out, stderr := run("audit", "anchor", "--anchors", anchors, dir)
			if code != ExitOK || !strings.HasPrefix(out, "anchored seq 2, hash ") {
				t.Fatalf("audit anchor = %d\n%s%s", code, out, stderr)
			}
			if code, out, _ := run("audit", "verify", "--anchors", anchors, dir); code != ExitOK || !strings.Contains(out, "; 1 anchors hold") {
				t.Fatalf("audit verify (intact, anchored) = %d, %q", code, out)
			}
			tt.edit(t, dir)
			if tt.adopt {
				if _, _, err := audit.AdoptHead(dir, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			if r := audit.Verify(dir); !r.OK() {
				t.Fatalf("the chain alone should pass the edit: %v", r.Problem)
			}
			code, out, _ = run("audit", "verify", "--anchors", anchors, dir)
			if code != ExitFailed || !strings.Contains(out, tt.want) {
				t.Fatalf("audit verify after %s = %d, %q; want %q", tt.name, code, out, tt.want)
			}
			if code, _, stderr := run("audit", "anchor", "--anchors", anchors, dir); code != ExitFailed || !strings.Contains(stderr, "not anchored") {
				t.Fatalf("audit anchor of a failing log = %d, %q", code, stderr)
			}
		})
	}
}

// TestAuditAnchorsFile: the default file is under XDG_STATE_HOME, holds
// every log's anchors apart, and must be the owner's alone.
func TestAuditAnchorsFile(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	a, b := auditLog(t), auditLog(t)
	for _, dir := range []string{a, a, b} {
		if code, out, stderr := run("audit", "anchor", dir); code != ExitOK {
			t.Fatalf("audit anchor %s = %d\n%s%s", dir, code, out, stderr)
		}
	}
	path := filepath.Join(os.Getenv("XDG_STATE_HOME"), "boxmaker", "audit-anchors.jsonl")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("anchors file %s: %v, %v", path, fi, err)
	}
	if code, out, _ := run("audit", "verify", a); code != ExitOK || !strings.Contains(out, "; 2 anchors hold") {
		t.Fatalf("audit verify a = %d, %q", code, out)
	}
	if code, out, _ := run("audit", "verify", b); code != ExitOK || !strings.Contains(out, "; 1 anchors hold") {
		t.Fatalf("audit verify b = %d, %q", code, out)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run("audit", "verify", a); code != ExitFailed || !strings.Contains(stderr, "see docs/runbook.md#owner-file-unsafe") {
		t.Fatalf("audit verify with an anchors file anyone can write = %d, %q", code, stderr)
	}
	if code, _, stderr := run("audit", "anchor", a); code != ExitFailed || !strings.Contains(stderr, "owner-file-unsafe") {
		t.Fatalf("audit anchor into an anchors file anyone can write = %d, %q", code, stderr)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run("audit", "verify", a); code != ExitFailed || !strings.Contains(stderr, "see docs/runbook.md#audit-anchors-invalid") {
		t.Fatalf("audit verify with a damaged anchors file = %d, %q", code, stderr)
	}
	empty := t.TempDir()
	if code, _, stderr := run("audit", "anchor", "--anchors", filepath.Join(t.TempDir(), "a.jsonl"), empty); code != ExitFailed || !strings.Contains(stderr, "nothing to anchor") {
		t.Fatalf("audit anchor (empty log) = %d, %q", code, stderr)
	}
}

// TestAuditAnchorWritesItsTime: anchoring a state directory's audit log
// writes the anchor's time into its metrics/ (for !status and
// node_exporter); anchoring a log elsewhere writes nothing there.
func TestAuditAnchorWritesItsTime(t *testing.T) {
	state := t.TempDir()
	dir := layout.Audit.In(state)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	src := auditLog(t)
	if err := errors.Join(os.Rename(src, dir), os.Rename(audit.HeadPath(src), audit.HeadPath(dir))); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(layout.Metrics.In(state), 0o755); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Second)
	code, out, stderr := run("audit", "anchor", "--anchors", filepath.Join(t.TempDir(), "a.jsonl"), dir)
	if code != ExitOK || !strings.Contains(out, layout.AnchorTimeFile(state)) {
		t.Fatalf("audit anchor = %d\n%s%s", code, out, stderr)
	}
	at, err := audit.ReadAnchorTime(layout.AnchorTimeFile(state))
	if err != nil || at.Before(before) || at.After(time.Now()) {
		t.Errorf("the anchor's time = %v, %v; anchored after %v", at, err, before)
	}
	other := auditLog(t)
	if code, out, _ := run("audit", "anchor", "--anchors", filepath.Join(t.TempDir(), "b.jsonl"), other); code != ExitOK || strings.Contains(out, "metrics") {
		t.Errorf("anchoring a log outside a state: %d %q", code, out)
	}
}
