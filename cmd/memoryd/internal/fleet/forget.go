package fleet

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
)

// Forgetting in fleet memory. Honcho cannot delete one message; the
// smallest thing it deletes is the session holding it (package honcho's
// DeleteSession, with the source it was read from). So a forget of a
// message memoryd filed:
//   - drops the message from the outbox and from every later filing
//     (catch-up, resync, a rebuilt outbox: [Outbox.SetSkip]);
//   - moves the session's other messages, and every later one, to a new
//     Honcho session, <session>--after-<tombstone>, unsent: Honcho keeps
//     the old name inactive until its queued deletion job runs, and
//     refuses new messages there;
//   - queues the old session's deletion in the outbox (deletions), sent
//     before any message, retried like one until Honcho answers.
// All three are one transaction. An outbox rebuilt from nothing loses the
// new names and files under the old ones again, which Honcho refuses until
// its deletion has run, then accepts; the forgotten message is never
// among them.

const forgetSchema = `
CREATE TABLE IF NOT EXISTS rehomed(workspace TEXT NOT NULL, session TEXT NOT NULL, hsession TEXT NOT NULL, PRIMARY KEY(workspace, session));
CREATE TABLE IF NOT EXISTS deletions(workspace TEXT NOT NULL, hsession TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(workspace, hsession));
`

// afterMark separates a session's name from the tombstone that moved it.
const afterMark = "--after-"

// SetSkip replaces the set of message ids never to file again.
func (o *Outbox) SetSkip(ids map[string]bool) {
	o.skipMu.Lock()
	o.skip = ids
	o.skipMu.Unlock()
}

func (o *Outbox) skipped(id string) bool {
	o.skipMu.RLock()
	defer o.skipMu.RUnlock()
	return o.skip[id]
}

// Forgotten is what [Outbox.Forget] did.
type Forgotten struct {
	Filed     bool // the outbox had the message
	Workspace string
	Old, New  string // the Honcho session deleted, and its successor
	Moved     int    // the session's other messages, filed again under New
	// Deleted: Honcho answered the deletion (202, or 404: gone before);
	// else Wait says why it stays queued.
	Deleted bool
	Wait    string
}

// Forget drops message id, re-homes its Honcho session's other messages
// under a name made with tomb, and queues the old session's deletion.
func (o *Outbox) Forget(id, tomb string) (Forgotten, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.skipMu.Lock()
	if o.skip == nil {
		o.skip = map[string]bool{}
	}
	o.skip[id] = true
	o.skipMu.Unlock()
	tx, err := o.db.Begin()
	if err != nil {
		return Forgotten{}, fmt.Errorf("forget %s: %w", id, err)
	}
	defer tx.Rollback()
	var f Forgotten
	switch err := tx.QueryRow(`SELECT workspace, hsession FROM outbox WHERE id = ?`, id).Scan(&f.Workspace, &f.Old); {
	case err == sql.ErrNoRows:
		return Forgotten{}, nil
	case err != nil:
		return Forgotten{}, fmt.Errorf("forget %s: %w", id, err)
	}
	f.Filed = true
	orig, _, _ := strings.Cut(f.Old, afterMark)
	f.New = orig + afterMark + tomb
	if _, err := honchoconf.ParseID(f.New); err != nil {
		return Forgotten{}, fmt.Errorf("forget %s: %w", id, err)
	}
	steps := []struct {
		q    string
		args []any
	}{
		{`DELETE FROM outbox WHERE id = ?`, []any{id}},
		{`INSERT OR REPLACE INTO rehomed(workspace, session, hsession) VALUES(?, ?, ?)`, []any{f.Workspace, orig, f.New}},
		{`INSERT OR IGNORE INTO deletions(workspace, hsession) VALUES(?, ?)`, []any{f.Workspace, f.Old}},
	}
	for _, s := range steps {
		if _, err := tx.Exec(s.q, s.args...); err != nil {
			return Forgotten{}, fmt.Errorf("forget %s: %w", id, err)
		}
	}
	res, err := tx.Exec(`UPDATE outbox SET hsession = ?, sent = 0, attempts = 0, lookup = 0, next_at = 0, last_error = '' WHERE workspace = ? AND hsession = ?`,
		f.New, f.Workspace, f.Old)
	if err != nil {
		return Forgotten{}, fmt.Errorf("forget %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	f.Moved = int(n)
	return f, tx.Commit()
}

// deleteDue asks Honcho for every queued session deletion, in order; the
// first failure stops it, and the send loop retries it with backoff.
func (f *Fleet) deleteDue(ctx context.Context) error {
	rows, err := f.outbox.db.Query(`SELECT workspace, hsession FROM deletions WHERE done = 0 ORDER BY rowid`)
	if err != nil {
		return fmt.Errorf("outbox deletions: %w", err)
	}
	type del struct{ ws, s string }
	var due []del
	for rows.Next() {
		var d del
		if err := rows.Scan(&d.ws, &d.s); err != nil {
			rows.Close()
			return err
		}
		due = append(due, d)
	}
	rows.Close()
	for _, d := range due {
		w, err1 := honchoconf.ParseID(d.ws)
		s, err2 := honchoconf.ParseID(d.s)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("outbox deletion of %s/%s: bad id", d.ws, d.s)
		}
		if err := f.client.DeleteSession(ctx, w, s); err != nil {
			return err
		}
		f.outbox.mu.Lock()
		_, err := f.outbox.db.Exec(`UPDATE deletions SET done = 1 WHERE workspace = ? AND hsession = ?`, d.ws, d.s)
		f.outbox.mu.Unlock()
		if err != nil {
			return fmt.Errorf("outbox deletions: %w", err)
		}
	}
	return nil
}

// SetForgotten sets the message ids a forget keeps out of Honcho.
func (f *Fleet) SetForgotten(ids map[string]bool) { f.outbox.SetSkip(ids) }

// Forget drops message id from fleet memory (tomb names the tombstone)
// and asks Honcho, within the read bound, to delete the session that
// held it; a deletion Honcho did not answer stays queued.
func (f *Fleet) Forget(ctx context.Context, id, tomb string) (Forgotten, error) {
	f.sendMu.Lock()
	defer f.sendMu.Unlock()
	fg, err := f.outbox.Forget(id, tomb)
	if err != nil || !fg.Filed {
		return fg, err
	}
	dctx, cancel := context.WithTimeout(ctx, f.ReadBound())
	defer cancel()
	if err := f.deleteDue(dctx); err != nil {
		fg.Wait = err.Error()
	} else {
		fg.Deleted = true
	}
	f.poke()
	return fg, nil
}
