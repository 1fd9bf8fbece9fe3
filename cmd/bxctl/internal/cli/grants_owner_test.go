package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const ownerGrant = "[[grant]]\nid = \"g\"\ntool = \"read_file\"\npaths = [\"/home/o\"]\nmax_taint = \"private\"\nmode = \"auto\"\n"

// TestGrantsCheckRefusesWhatOthersCanWrite: `bxctl grants check` said ok
// for a grant linked to another uid's file and for a 0666 grant (issue
// 13 item 1); it now says what brokerd does, and why.
func TestGrantsCheckRefusesWhatOthersCanWrite(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "g.toml")
	if err := os.WriteFile(f, []byte(ownerGrant), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run("grants", "check", dir); code != ExitOK {
		t.Fatalf("grants check (owner's 0644 grant) = %d\n%s%s", code, out, stderr)
	}
	if err := os.Chmod(f, 0o666); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run("grants", "check", dir)
	if code != ExitFailed || !strings.Contains(out, f+": "+f+" is writable by everyone (mode 0666)") || !strings.Contains(out, "owner-file-unsafe") ||
		!strings.Contains(stderr, "grants_invalid") {
		t.Fatalf("grants check (0666 grant) = %d\n%s%s", code, out, stderr)
	}
	if os.Getuid() != 0 {
		t.Skip("giving a file to another uid needs root")
	}
	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(t.TempDir(), "theirs.toml")
	if err := os.WriteFile(theirs, []byte(strings.ReplaceAll(ownerGrant, `"g"`, `"t"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 4242, -1); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(theirs, filepath.Join(dir, "t.toml")); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run("grants", "check", dir)
	if code != ExitFailed || !strings.Contains(out, theirs+" (on its path) is owned by uid 4242, who is not root") {
		t.Fatalf("grants check (link to uid 4242's file) = %d\n%s%s", code, out, stderr)
	}
	// With the owner named as brokerd.toml names it, that owner's files
	// pass and root's still do.
	if err := os.Remove(filepath.Join(dir, "t.toml")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, f} {
		if err := os.Chown(p, 4242, -1); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, stderr := run("grants", "check", "--owner-uid", "4242", dir); code != ExitOK {
		t.Fatalf("grants check --owner-uid 4242 = %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := run("grants", "check", "--owner-uid", strconv.Itoa(4243), dir); code != ExitFailed || !strings.Contains(out, "owned by uid 4242, who is not root or uid 4243") {
		t.Fatalf("grants check --owner-uid 4243 = %d\n%s", code, out)
	}
	if code, _, _ := run("grants", "check", "--owner-uid", "-1", dir); code != ExitUsage {
		t.Fatalf("grants check --owner-uid -1 = %d, want usage", code)
	}
}
