package report

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestAuditFileOnlyRegular: a day's audit file that is a FIFO (which a
// plain open would wait on for ever), a link or a directory is refused
// at once, naming the runbook entry.
func TestAuditFileOnlyRegular(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(p string) error
	}{
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"a link to a regular file", func(p string) error {
			q := filepath.Join(filepath.Dir(p), "elsewhere")
			if err := os.WriteFile(q, nil, 0o600); err != nil {
				return err
			}
			return os.Symlink(q, p)
		}},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			dir := layout.Audit.In(state)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := c.make(filepath.Join(dir, "2026-12-01.jsonl")); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, err := Collect(state, time.Time{}); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "#audit-unreadable") {
					t.Errorf("Collect = %v; want it refused", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Collect is still waiting on the file")
			}
		})
	}
}
