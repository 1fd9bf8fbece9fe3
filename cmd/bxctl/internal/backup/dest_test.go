package backup

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestReadFileBounded: restore reads a backup's file only as a regular
// file, not through a link, not waiting on a FIFO, and no more than the
// manifest's size.
func TestReadFileBounded(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	must(t, os.WriteFile(reg, []byte("12345"), 0o600))
	link := filepath.Join(dir, "link")
	must(t, os.Symlink(reg, link))
	fifo := filepath.Join(dir, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	for _, c := range []struct {
		name string
		p    string
		size int64
		ok   bool
	}{
		{"regular", reg, 5, true},
		{"longer than the manifest says", reg, 4, false},
		{"a link", link, 5, false},
		{"a FIFO", fifo, 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := readFile(c.p, c.size); done <- err }()
			select {
			case err := <-done:
				if (err == nil) != c.ok {
					t.Errorf("readFile = %v, want ok %v", err, c.ok)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("readFile waits on the FIFO")
			}
		})
	}
}
