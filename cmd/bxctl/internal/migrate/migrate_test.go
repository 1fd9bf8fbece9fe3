package migrate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestMigrateBacksUpFirst: every step runs only after the backup was
// taken, and the format is recorded after each; a failed backup changes
// nothing; a failed step leaves the format at the last step done and
// names the backup.
func TestMigrateBacksUpFirst(t *testing.T) {
	state := t.TempDir()
	dest := filepath.Join(t.TempDir(), "backup")
	var order []string
	take := func(s, d string) error {
		order = append(order, "backup")
		return os.Mkdir(d, 0o700)
	}
	steps := []Step{
		{From: 0, What: "zero", Apply: func(s string) error {
			if _, err := os.Lstat(dest); err != nil {
				t.Error("step 0 ran before the backup")
			}
			order = append(order, "0")
			return os.WriteFile(filepath.Join(s, "moved"), []byte("x"), 0o600)
		}},
		{From: 1, What: "one", Apply: func(s string) error {
			if n, _ := layout.ReadFormat(s); n != 1 {
				t.Errorf("step 1 ran on format %d", n)
			}
			order = append(order, "1")
			return nil
		}},
	}
	r, err := Run(state, steps, 2, dest, take)
	if err != nil || r.From != 0 || r.To != 2 || r.Backup != dest || strings.Join(order, ",") != "backup,0,1" {
		t.Fatalf("Run = %+v, %v; order %v", r, err, order)
	}
	if n, _ := layout.ReadFormat(state); n != 2 {
		t.Errorf("format after = %d", n)
	}
	// At the current format: nothing, no backup.
	order = nil
	if r, err := Run(state, steps, 2, dest+"2", take); err != nil || r.Backup != "" || len(order) != 0 {
		t.Errorf("at the current format: %+v, %v, %v", r, err, order)
	}
	// Newer: refused, nothing taken.
	if _, err := Run(state, steps, 1, dest+"3", take); err == nil || !strings.Contains(err.Error(), "#state-newer") || len(order) != 0 {
		t.Errorf("newer: %v, %v", err, order)
	}
}

func TestMigrateRefusals(t *testing.T) {
	state := t.TempDir()
	ran := false
	steps := []Step{{From: 0, What: "zero", Apply: func(string) error { ran = true; return nil }}}
	// A failed backup: no step runs, the format stays.
	_, err := Run(state, steps, 1, "x", func(string, string) error { return errors.New("disk full") })
	if err == nil || ran || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("failed backup: %v, ran %v", err, ran)
	}
	if _, err := os.Lstat(layout.FormatFile.In(state)); !os.IsNotExist(err) {
		t.Errorf("a format was recorded: %v", err)
	}
	// A missing step: refused before the backup.
	took := false
	_, err = Run(state, steps, 2, "x", func(string, string) error { took = true; return nil })
	if err == nil || took || !strings.Contains(err.Error(), "no step from format 1") {
		t.Errorf("missing step: %v, took %v", err, took)
	}
	// A failed step: the format stays at the step before, the backup named.
	steps = []Step{{From: 0, What: "zero", Apply: func(string) error { return errors.New("boom") }}}
	_, err = Run(state, steps, 1, "/b/x", func(string, string) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "restore /b/x") {
		t.Errorf("failed step: %v", err)
	}
	if n, _ := layout.ReadFormat(state); n != 0 {
		t.Errorf("format after a failed step: %d", n)
	}
}

// TestStepsReachThisFormat: this build has a step from every format
// older than its own, from the oldest it runs down to 0.
func TestStepsReachThisFormat(t *testing.T) {
	for n := 0; n < layout.Format; n++ {
		if stepFrom(Steps, n) == nil {
			t.Errorf("no step from format %d", n)
		}
	}
}
