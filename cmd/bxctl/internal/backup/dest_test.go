package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBackupDest: a backup goes only into a directory it makes, or an
// empty one of the caller's with mode 0700; anything else is refused
// before a file is written.
func TestBackupDest(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(t *testing.T, dest string)
		ok   bool
	}{
		{"missing", func(*testing.T, string) {}, true},
		{"missing, its parent too", func(t *testing.T, dest string) {}, true},
		{"empty, the caller's, 0700", func(t *testing.T, dest string) { must(t, os.Mkdir(dest, 0o700)) }, true},
		{"empty, 0755", func(t *testing.T, dest string) { must(t, os.Mkdir(dest, 0o700)); must(t, os.Chmod(dest, 0o755)) }, false},
		{"empty, someone else's", func(t *testing.T, dest string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a directory away")
			}
			must(t, os.Mkdir(dest, 0o700))
			must(t, os.Chown(dest, 1000, 1000))
		}, false},
		{"a link to an empty directory", func(t *testing.T, dest string) {
			d := filepath.Join(t.TempDir(), "d")
			must(t, os.Mkdir(d, 0o700))
			must(t, os.Symlink(d, dest))
		}, false},
		{"not empty", func(t *testing.T, dest string) {
			must(t, os.Mkdir(dest, 0o700))
			must(t, os.WriteFile(filepath.Join(dest, "x"), nil, 0o600))
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, _ := newState(t)
			dest := filepath.Join(t.TempDir(), "b")
			if strings.Contains(c.name, "parent") {
				dest = filepath.Join(t.TempDir(), "p", "b")
			}
			c.make(t, dest)
			_, err := Take(state, dest, time.Now())
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				fi, err := os.Lstat(dest)
				if err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("the backup's directory: %v, %v", fi.Mode(), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "#backup-failed") {
				t.Fatalf("Take = %v; want it refused", err)
			}
			if _, err := os.Lstat(filepath.Join(dest, ManifestName)); err == nil {
				t.Error("a refused backup wrote its manifest")
			}
		})
	}
}
