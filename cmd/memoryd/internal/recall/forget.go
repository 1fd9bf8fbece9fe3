package recall

import (
	"fmt"
	"strings"
)

// Tombstones are memoryd's (package store keeps them in notes.md); the
// index only honours the set it is given: a forgotten document is
// deleted from docs, never indexed again (a catch-up or rebuild skips
// it), and a hit on one is dropped before recall answers, so no order of
// writes can bring one back. The set is in memory only: memoryd sets it
// from notes.md whenever it opens or rebuilds the index.

// SetForgotten replaces the set of forgotten keys ([Doc.Key]).
func (x *Index) SetForgotten(keys map[string]string) {
	gone := make(map[string]bool, len(keys))
	for k := range keys {
		gone[k] = true
	}
	x.goneMu.Lock()
	x.gone = gone
	x.goneMu.Unlock()
}

// forgotten reports whether a document is forgotten.
func (x *Index) forgotten(d Doc) bool {
	x.goneMu.RLock()
	defer x.goneMu.RUnlock()
	return len(x.gone) > 0 && x.gone[d.Key()]
}

// Forget adds key to the forgotten set and deletes its documents from
// the index; it returns how many it deleted.
func (x *Index) Forget(key string) (int64, error) {
	x.goneMu.Lock()
	if x.gone == nil {
		x.gone = map[string]bool{}
	}
	x.gone[key] = true
	x.goneMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	q, args := `DELETE FROM docs WHERE note = ?`, []any{key}
	if strings.HasPrefix(key, "session ") {
		var s string
		var e, t, r int64
		if _, err := fmt.Sscanf(key, "session %s epoch %d turn %d record %d", &s, &e, &t, &r); err != nil {
			return 0, fmt.Errorf("forget %q: %w", key, err)
		}
		q, args = `DELETE FROM docs WHERE note = '' AND session = ? AND epoch = ? AND turn = ? AND record = ?`, []any{s, e, t, r}
	}
	res, err := x.db.Exec(q, args...)
	if err != nil {
		return 0, fmt.Errorf("forget %q: %w", key, err)
	}
	return res.RowsAffected()
}

// Unforget takes key out of the forgotten set; the caller indexes its
// document again (a note is re-added by [Index.AddNotes] once its id is
// unmarked, a session record by a rebuild).
func (x *Index) Unforget(key string) error {
	x.goneMu.Lock()
	delete(x.gone, key)
	x.goneMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	_, err := x.db.Exec(`DELETE FROM notes WHERE id = ?`, key)
	return err
}
