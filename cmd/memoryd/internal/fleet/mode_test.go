package fleet

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestOutboxFilesMode: under the umask daemon.Main gives memoryd
// (layout.Umask), the outbox and the -wal and -shm files SQLite makes
// beside it have the layout's 0600 from their first byte, where SQLite's
// own default is 0644 (it gives -wal and -shm the database's mode).
func TestOutboxFilesMode(t *testing.T) {
	old := syscall.Umask(int(layout.Umask(layout.Memoryd, layout.DefaultUsers(layout.ID{UID: 1000, GID: 1000}))))
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "fleet.db")
	o, err := OpenOutbox(p)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := o.db.ExecContext(context.Background(), "CREATE TABLE IF NOT EXISTS mode_probe(x)"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{p, p + "-wal", p + "-shm"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatalf("%s: %v (WAL mode makes it while open)", filepath.Base(f), err)
		}
		if got := fi.Mode().Perm(); got != layout.Index.Files {
			t.Errorf("%s has mode %#o, want %#o", filepath.Base(f), got, layout.Index.Files)
		}
	}
}
