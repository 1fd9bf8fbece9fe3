package fleet

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// The outbox is one SQLite file (index/fleet.db): every ended turn's
// filing decision, and every message to Honcho with its state. A row is
// committed before anything is sent and marked sent only after Honcho
// confirmed it, so a crash or an outage loses nothing; a message whose
// send was attempted before (its answer may have been lost) is looked
// for in Honcho by its id before it is sent again. late holds the turns
// whose gate query went unanswered in time (filed untrusted whenever
// brokerd answers). An outbox created anew (index/ is disposable: the
// runbooks tell the owner to delete fleet.db) is marked rebuilt in meta
// until its first complete catch-up: every message filed meanwhile may
// be in Honcho from the outbox before, so each is looked for there
// (over its whole session) before it is sent.
const outboxSchema = `
CREATE TABLE IF NOT EXISTS filed(key TEXT PRIMARY KEY, filing TEXT NOT NULL, reason TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, workspace TEXT NOT NULL,
	hsession TEXT NOT NULL, peer TEXT NOT NULL, content TEXT NOT NULL, metadata TEXT NOT NULL,
	sent INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS late(key TEXT PRIMARY KEY, reason TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
`

// metaRebuilt is meta's key of an outbox not caught up since it was made.
const metaRebuilt = "rebuilt"

// Item is one message in the outbox.
type Item struct {
	Seq       int64
	ID        string // ours: derived from session, epoch and record (or the note)
	Workspace string
	Session   string // Honcho's session
	Peer      string
	Content   string
	Metadata  map[string]string
	Attempts  int // earlier sends; >0: look for it in Honcho before sending again
	// Lookup: look for it over its whole Honcho session before sending
	// (filed into a rebuilt outbox, or resynced): it may have been sent
	// long ago, by an outbox since deleted.
	Lookup bool
}

// Outbox is the durable queue.
type Outbox struct {
	db *sql.DB
	mu sync.Mutex // orders writers

	skipMu sync.RWMutex
	skip   map[string]bool // forgotten message ids, never filed (forget.go)
}

// OpenOutbox opens (creating) the outbox at path.
func OpenOutbox(path string) (*Outbox, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	if err := setUp(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open outbox %s: %w", path, err)
	}
	return &Outbox{db: db}, nil
}

// setUp creates the tables, marking a new outbox rebuilt, and adds the
// lookup column to an outbox made before it existed.
func setUp(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var had int
	if err := tx.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'filed'`).Scan(&had); err != nil {
		return err
	}
	if _, err := tx.Exec(outboxSchema + forgetSchema); err != nil {
		return err
	}
	var hasLookup int
	if err := tx.QueryRow(`SELECT count(*) FROM pragma_table_info('outbox') WHERE name = 'lookup'`).Scan(&hasLookup); err != nil {
		return err
	}
	if hasLookup == 0 {
		if _, err := tx.Exec(`ALTER TABLE outbox ADD COLUMN lookup INTEGER NOT NULL DEFAULT 0`); err != nil {
			return err
		}
	}
	if had == 0 {
		if _, err := tx.Exec(`INSERT OR IGNORE INTO meta(key, value) VALUES(?, ?)`, metaRebuilt, time.Now().UTC().Format(time.RFC3339)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Rebuilt reports whether the outbox was made anew and has not caught
// up since: what it files is looked for in Honcho before it is sent.
func (o *Outbox) Rebuilt() (bool, error) {
	var n int
	err := o.db.QueryRow(`SELECT count(*) FROM meta WHERE key = ?`, metaRebuilt).Scan(&n)
	return n > 0, err
}

// CaughtUp ends the rebuilt state: every session log has been filed.
func (o *Outbox) CaughtUp() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.db.Exec(`DELETE FROM meta WHERE key = ?`, metaRebuilt); err != nil {
		return fmt.Errorf("outbox caught up: %w", err)
	}
	return nil
}

// MarkLate records that keys' gate query went unanswered in time: when
// they are filed, they are untrusted.
func (o *Outbox) MarkLate(keys []string, reason string, now time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	tx, err := o.db.Begin()
	if err != nil {
		return fmt.Errorf("outbox mark late: %w", err)
	}
	defer tx.Rollback()
	for _, k := range keys {
		if _, err := tx.Exec(`INSERT OR IGNORE INTO late(key, reason, at) VALUES(?, ?, ?)`, k, reason, now.UTC().Format(time.RFC3339)); err != nil {
			return fmt.Errorf("outbox mark late %s: %w", k, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox mark late: %w", err)
	}
	return nil
}

// Late reports whether key was marked late.
func (o *Outbox) Late(key string) (bool, error) {
	var n int
	err := o.db.QueryRow(`SELECT count(*) FROM late WHERE key = ?`, key).Scan(&n)
	return n > 0, err
}

// Close closes the database.
func (o *Outbox) Close() error { return o.db.Close() }

// Filed reports whether key (a turn or a note) has a filing decision.
func (o *Outbox) Filed(key string) (bool, error) {
	var n int
	err := o.db.QueryRow(`SELECT count(*) FROM filed WHERE key = ?`, key).Scan(&n)
	return n > 0, err
}

// File records key's decision and its messages in one transaction; a
// key already filed is left as it is (its first decision stands).
func (o *Outbox) File(key string, f Filing, reason string, items []Item, now time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	tx, err := o.db.Begin()
	if err != nil {
		return fmt.Errorf("file %s: %w", key, err)
	}
	defer tx.Rollback()
	res, err := tx.Exec(`INSERT OR IGNORE INTO filed(key, filing, reason, at) VALUES(?, ?, ?, ?)`, key, string(f), reason, now.UTC().Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("file %s: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	// Filed, a turn's late mark has done its work.
	if _, err := tx.Exec(`DELETE FROM late WHERE key = ?`, key); err != nil {
		return fmt.Errorf("file %s: %w", key, err)
	}
	var rebuilt int
	if err := tx.QueryRow(`SELECT count(*) FROM meta WHERE key = ?`, metaRebuilt).Scan(&rebuilt); err != nil {
		return fmt.Errorf("file %s: %w", key, err)
	}
	for _, it := range items {
		if o.skipped(it.ID) {
			continue
		}
		// A session a forget deleted in Honcho is written under its new
		// name (forget.go).
		var now string
		switch err := tx.QueryRow(`SELECT hsession FROM rehomed WHERE workspace = ? AND session = ?`, it.Workspace, it.Session).Scan(&now); {
		case err == nil:
			it.Session = now
		case err != sql.ErrNoRows:
			return fmt.Errorf("file %s: %w", key, err)
		}
		md, err := json.Marshal(it.Metadata)
		if err != nil {
			return fmt.Errorf("file %s: %w", key, err)
		}
		if _, err := tx.Exec(`INSERT OR IGNORE INTO outbox(id, workspace, hsession, peer, content, metadata, lookup) VALUES(?, ?, ?, ?, ?, ?, ?)`,
			it.ID, it.Workspace, it.Session, it.Peer, it.Content, string(md), min(rebuilt, 1)); err != nil {
			return fmt.Errorf("file %s: %w", key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("file %s: %w", key, err)
	}
	return nil
}

// Due is the oldest unsent messages that are due at now, all of one
// Honcho session (the first due one's), in order, at most limit.
func (o *Outbox) Due(now time.Time, limit int) ([]Item, error) {
	var ws, hs string
	err := o.db.QueryRow(`SELECT workspace, hsession FROM outbox WHERE sent = 0 AND next_at <= ? ORDER BY seq LIMIT 1`, now.UnixMilli()).Scan(&ws, &hs)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox due: %w", err)
	}
	rows, err := o.db.Query(`SELECT seq, id, peer, content, metadata, attempts, lookup FROM outbox WHERE sent = 0 AND next_at <= ? AND workspace = ? AND hsession = ? ORDER BY seq LIMIT ?`,
		now.UnixMilli(), ws, hs, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox due: %w", err)
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		it := Item{Workspace: ws, Session: hs}
		var md string
		if err := rows.Scan(&it.Seq, &it.ID, &it.Peer, &it.Content, &md, &it.Attempts, &it.Lookup); err != nil {
			return nil, fmt.Errorf("outbox due: %w", err)
		}
		if err := json.Unmarshal([]byte(md), &it.Metadata); err != nil {
			return nil, fmt.Errorf("outbox due: item %s: %w", it.ID, err)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

func (o *Outbox) update(q string, ids []string, args ...any) error {
	if len(ids) == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	marks := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	all := append(args, anySlice(ids)...)
	_, err := o.db.Exec(q+` WHERE id IN (`+marks+`)`, all...)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

func anySlice(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// Attempting records that ids are about to be sent: committed first, so
// that after a crash their next send looks for them in Honcho.
func (o *Outbox) Attempting(ids []string) error {
	return o.update(`UPDATE outbox SET attempts = attempts + 1`, ids)
}

// Sent marks ids as held by Honcho.
func (o *Outbox) Sent(ids []string) error {
	return o.update(`UPDATE outbox SET sent = 1, last_error = ''`, ids)
}

// Failed puts ids off until next, recording why.
func (o *Outbox) Failed(ids []string, why string, next time.Time) error {
	return o.update(`UPDATE outbox SET next_at = ?, last_error = ?`, ids, next.UnixMilli(), why)
}

// NextDue is when the earliest unsent message is due; ok is false when
// nothing is unsent.
func (o *Outbox) NextDue() (at time.Time, ok bool, err error) {
	var next sql.NullInt64
	if err := o.db.QueryRow(`SELECT min(next_at) FROM outbox WHERE sent = 0`).Scan(&next); err != nil {
		return time.Time{}, false, fmt.Errorf("outbox next due: %w", err)
	}
	if !next.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(next.Int64), true, nil
}

// Resync marks every message unsent and due, each to be looked for in
// Honcho (over its whole session) before it is sent (bxctl memory resync): Honcho ends up holding
// every message once, whether it lost them or not.
func (o *Outbox) Resync() (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	res, err := o.db.Exec(`UPDATE outbox SET sent = 0, next_at = 0, attempts = max(attempts, 1), lookup = 1, last_error = ''`)
	if err != nil {
		return 0, fmt.Errorf("outbox resync: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Status is the outbox's state, for bxctl memory.
type Status struct {
	Pending, Sent                     int
	Trusted, Untrusted, Withheld      int // filing decisions
	OldestPending, LastError, NextTry string
}

// Status reads the outbox's state.
func (o *Outbox) Status() (Status, error) {
	var s Status
	err := o.db.QueryRow(`SELECT coalesce(sum(sent = 0), 0), coalesce(sum(sent = 1), 0) FROM outbox`).Scan(&s.Pending, &s.Sent)
	if err != nil {
		return s, fmt.Errorf("outbox status: %w", err)
	}
	rows, err := o.db.Query(`SELECT filing, count(*) FROM filed GROUP BY filing`)
	if err != nil {
		return s, fmt.Errorf("outbox status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var f string
		var n int
		if err := rows.Scan(&f, &n); err != nil {
			return s, err
		}
		switch Filing(f) {
		case Trusted:
			s.Trusted = n
		case Untrusted:
			s.Untrusted = n
		case Withheld:
			s.Withheld = n
		}
	}
	var next int64
	err = o.db.QueryRow(`SELECT id, last_error, next_at FROM outbox WHERE sent = 0 ORDER BY seq LIMIT 1`).Scan(&s.OldestPending, &s.LastError, &next)
	if err != nil && err != sql.ErrNoRows {
		return s, fmt.Errorf("outbox status: %w", err)
	}
	if next > 0 {
		s.NextTry = time.UnixMilli(next).UTC().Format(time.RFC3339)
	}
	return s, rows.Err()
}
