package backup

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// OutboxPath is fleet memory's outbox (memoryd's index/fleet.db): state
// nothing rebuilds. It holds the Honcho session deletions a forget
// queued and not yet done, the sessions a forget moved to a new Honcho
// session, the turns whose gate query went unanswered, and the messages
// not yet in Honcho; a catch-up from the session logs refiles the last
// but knows nothing of the rest (a forgotten message would stay in
// Honcho). So a backup takes it, through SQLite's VACUUM INTO: a
// consistent snapshot of the database while memoryd writes it.
const OutboxPath = "index/fleet.db"

// sqliteURI is the URI of the database at p with query q; p is escaped,
// so a directory name holding '?' or '#' is a name.
func sqliteURI(p, q string) string {
	return "file:" + (&url.URL{Path: p}).EscapedPath() + "?" + q
}

// outbox copies the fleet outbox, if there is one, as a snapshot taken
// read-only: the connection never writes the database, and SQLite gives
// a -shm file it makes as root the database's owner (os_unix.c,
// unixOpenSharedMemory's robustFchown), so memoryd can open it after.
func (t *taker) outbox() error {
	src := filepath.Join(t.state, filepath.FromSlash(OutboxPath))
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", OutboxPath)
	}
	// The snapshot is written beside files/, in the backup's private
	// directory, and read back into files/ with its hash.
	tmp := filepath.Join(filepath.Dir(t.dest), ".fleet.db")
	defer os.Remove(tmp)
	db, err := sql.Open("sqlite", sqliteURI(src, "mode=ro&_pragma=busy_timeout(10000)"))
	if err != nil {
		return fmt.Errorf("%s: %w", OutboxPath, err)
	}
	_, err = db.Exec(`VACUUM INTO ?`, tmp)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: SQLite's snapshot: %w", OutboxPath, err)
	}
	if err := markRestored(tmp); err != nil {
		return fmt.Errorf("%s: %w", OutboxPath, err)
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	return t.write(OutboxPath, b, unixMode(fi))
}

// markRestored makes the snapshot at p an outbox as memoryd makes one
// anew (fleet/outbox.go: meta's "rebuilt", each unsent message's
// lookup): by the time it is restored, memoryd may have sent what it
// holds as unsent, and Honcho does not deduplicate, so every message is
// looked for in its Honcho session before it is sent, until a catch-up
// has filed every session log again.
func markRestored(p string) error {
	db, err := sql.Open("sqlite", sqliteURI(p, "_pragma=busy_timeout(1000)"))
	if err != nil {
		return err
	}
	defer db.Close()
	var lookup int
	if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('outbox') WHERE name = 'lookup'`).Scan(&lookup); err != nil {
		return err
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if lookup > 0 {
		if _, err := tx.Exec(`UPDATE outbox SET lookup = 1 WHERE sent = 0`); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`INSERT OR REPLACE INTO meta(key, value) VALUES('rebuilt', 'restored from a backup')`); err != nil {
		return err
	}
	return tx.Commit()
}

// checkOutbox verifies a restored outbox: SQLite's integrity check
// passes and it has the outbox's table; it returns how many messages
// wait to be sent. The file is opened immutable: nothing else has it,
// and no -shm or -wal is made beside it.
func checkOutbox(dir string) (int, error) {
	p := filepath.Join(dir, filepath.FromSlash(OutboxPath))
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	db, err := sql.Open("sqlite", sqliteURI(p, "mode=ro&immutable=1"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil {
		return 0, err
	}
	if ok != "ok" {
		return 0, fmt.Errorf("SQLite's integrity check: %s", ok)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM outbox WHERE sent = 0`).Scan(&n); err != nil {
		return 0, err
	}
	return n, nil
}
