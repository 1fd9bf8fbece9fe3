package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/cmd/bxctl/internal/backup"
	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestMigrateTakesABackup: bxctl migrate on a format 0 state takes a
// backup that checks against its manifest, then records the format; a
// second run has nothing to do.
func TestMigrateTakesABackup(t *testing.T) {
	dir := roletest.Dir(t)
	state := filepath.Join(dir, "state")
	if err := up.MakeState(t.Context(), up.Options{State: state, Llama: "127.0.0.1:1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	os.Remove(layout.FormatFile.In(state))
	dest := filepath.Join(dir, "pre")
	code, out, stderr := run("migrate", "--state", state, "--backup", dest)
	if code != ExitOK || !strings.Contains(out, "backup before migrating: "+dest) || !strings.Contains(out, "format 0 to 1") {
		t.Fatalf("migrate = %d, %q, %q", code, out, stderr)
	}
	m, err := backup.ReadManifest(dest)
	if err != nil || m.Format != 0 || m.CheckFiles(dest) != nil {
		t.Fatalf("the backup before migrating: %+v, %v", m, err)
	}
	if n, _ := layout.ReadFormat(state); n != layout.Format {
		t.Errorf("format after migrate: %d", n)
	}
	code, out, _ = run("migrate", "--state", state, "--backup", dest+"2")
	if code != ExitOK || !strings.Contains(out, "nothing to do") {
		t.Errorf("second migrate = %d, %q", code, out)
	}
	if _, err := os.Stat(dest + "2"); !os.IsNotExist(err) {
		t.Errorf("a migration with nothing to do took a backup")
	}
}

// TestBackupRestoreCommands: bxctl backup then bxctl restore into a new
// directory, and restore refusing the state it came from.
func TestBackupRestoreCommands(t *testing.T) {
	dir := roletest.Dir(t)
	state := filepath.Join(dir, "state")
	if err := up.MakeState(t.Context(), up.Options{State: state, Llama: "127.0.0.1:1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "b")
	code, out, stderr := run("backup", "--state", state, dest)
	if code != ExitOK || !strings.Contains(out, "left out: secrets/") {
		t.Fatalf("backup = %d, %q, %q", code, out, stderr)
	}
	code, _, stderr = run("restore", dest, state)
	if code != ExitFailed || !strings.Contains(stderr, "#restore-not-empty") {
		t.Errorf("restore over the state = %d, %q", code, stderr)
	}
	anchors := filepath.Join(dir, "anchors.jsonl")
	code, _, stderr = run("restore", "--anchors", anchors, dest, filepath.Join(dir, "new"))
	if code != ExitFailed || !strings.Contains(stderr, "#restore-anchors") {
		t.Errorf("restore with no anchor of the state = %d, %q", code, stderr)
	}
	code, out, stderr = run("restore", "--anchors", anchors, "--from", state, "--no-anchors", dest, filepath.Join(dir, "new"))
	// bxctl up's configs name no path (the layout table's are the
	// state directory's): none is moved.
	if code != ExitOK || strings.Contains(out, "paths moved") || !strings.Contains(out, "index/") {
		t.Errorf("restore = %d, %q, %q", code, out, stderr)
	}
}
