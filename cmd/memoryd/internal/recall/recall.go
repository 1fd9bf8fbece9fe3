// Package recall is memoryd's local index: SQLite FTS5 over the session
// logs and notes.md, behind the [Retriever] interface that Honcho will
// also implement.
//
// Invariants:
//   - the index is disposable: everything in it but the hit counts is
//     derived from sessions/ and memory/notes.md, and [Index.Rebuild]
//     makes it again from those files alone, with no network and no model;
//   - every hit carries its source tag (identity, memory, memory-tainted),
//     where it came from and its data class; nothing above the configured
//     class is indexed;
//   - the model's query never reaches SQL or FTS5 syntax: it is cut into
//     words, each quoted, and bound as a parameter.
package recall

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/pkg/dataclass"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Source tags for notes, as package store names them.
const (
	SourceIdentity = "identity"
	SourceMemory   = "memory"
	SourceTainted  = "memory-tainted"
)

// Limits of one recall.
const (
	MaxK       = 10
	DefaultK   = 5
	SnippetCap = 400 // bytes of one snippet
	maxWords   = 16
)

// Hit is one recalled item.
type Hit struct {
	Doc
	Snippet string
}

// Retriever finds remembered items for a query. Implementations label
// every hit; callers taint the session with the hits' classes.
type Retriever interface {
	Recall(ctx context.Context, query string, k int) ([]Hit, error)
}

var _ Retriever = (*Index)(nil)

// Index is the FTS5 index in one SQLite file.
type Index struct {
	db       *sql.DB
	maxClass dataclass.Class
	now      func() time.Time

	mu sync.Mutex // orders writers (SQLite allows one)
}

const schema = `
CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(text, source UNINDEXED, class UNINDEXED, session UNINDEXED,
	epoch UNINDEXED, turn UNINDEXED, record UNINDEXED, note UNINDEXED, tokenize='unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS turns(session TEXT NOT NULL, epoch INTEGER NOT NULL, turn INTEGER NOT NULL, PRIMARY KEY(session, epoch, turn));
CREATE TABLE IF NOT EXISTS notes(id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS note_hits(id TEXT PRIMARY KEY, hits INTEGER NOT NULL, last_found TEXT NOT NULL);
`

// Open opens (creating) the index at path. Nothing above maxClass is
// indexed.
func Open(path string, maxClass dataclass.Class, now func() time.Time) (*Index, error) {
	if now == nil {
		now = time.Now
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open index %s: %w", path, err)
	}
	return &Index{db: db, maxClass: maxClass, now: now}, nil
}

// Close closes the database.
func (x *Index) Close() error { return x.db.Close() }

// AddTurns indexes the turns not indexed yet; it returns how many
// documents it added.
func (x *Index) AddTurns(turns []Turn) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	tx, err := x.db.Begin()
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	n := 0
	for _, t := range turns {
		res, err := tx.Exec(`INSERT OR IGNORE INTO turns(session, epoch, turn) VALUES(?, ?, ?)`, t.Session, t.Epoch, t.Turn)
		if err != nil {
			return 0, err
		}
		if k, _ := res.RowsAffected(); k == 0 || !t.Class.AtMost(x.maxClass) {
			continue // indexed already, or above the configured class
		}
		for _, d := range t.Docs {
			if err := insert(tx, d); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, tx.Commit()
}

// AddNotes indexes notes not indexed yet.
func (x *Index) AddNotes(notes []Doc) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	tx, err := x.db.Begin()
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	n := 0
	for _, d := range notes {
		res, err := tx.Exec(`INSERT OR IGNORE INTO notes(id) VALUES(?)`, d.Note)
		if err != nil {
			return 0, err
		}
		if k, _ := res.RowsAffected(); k == 0 || !d.Class.AtMost(x.maxClass) {
			continue
		}
		if err := insert(tx, d); err != nil {
			return 0, err
		}
		n++
	}
	return n, tx.Commit()
}

func insert(tx *sql.Tx, d Doc) error {
	_, err := tx.Exec(`INSERT INTO docs(text, source, class, session, epoch, turn, record, note) VALUES(?, ?, ?, ?, ?, ?, ?, ?)`,
		d.Text, d.Source, d.Class.String(), d.Session, d.Epoch, d.Turn, d.Record, d.Note)
	return err
}

// Clear empties the index but keeps the hit counts (which no file holds).
func (x *Index) Clear() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, err := x.db.Exec(`DELETE FROM docs; DELETE FROM turns; DELETE FROM notes;`)
	return err
}

var wordRE = regexp.MustCompile(`[\p{L}\p{N}]+`)

// match turns the model's query into an FTS5 expression of quoted words,
// any of which may match (ranked by bm25). "" means no word.
func match(query string) string {
	words := wordRE.FindAllString(query, maxWords)
	for i, w := range words {
		words[i] = `"` + w + `"`
	}
	return strings.Join(words, " OR ")
}

// Recall returns up to k hits for query, best first, and counts the hits
// on notes.
func (x *Index) Recall(ctx context.Context, query string, k int) ([]Hit, error) {
	if k <= 0 {
		k = DefaultK
	}
	k = min(k, MaxK)
	q := match(query)
	if q == "" {
		return nil, nil
	}
	rows, err := x.db.QueryContext(ctx, `SELECT snippet(docs, 0, '', '', '…', 40), text, source, class, session, epoch, turn, record, note
		FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?`, q, k)
	if err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	defer rows.Close()
	var hits []Hit
	for rows.Next() {
		var h Hit
		var class string
		if err := rows.Scan(&h.Snippet, &h.Text, &h.Source, &class, &h.Session, &h.Epoch, &h.Turn, &h.Record, &h.Note); err != nil {
			return nil, err
		}
		c, err := dataclass.Parse(class)
		if err != nil {
			return nil, fmt.Errorf("recall: index holds a bad class: %w", err)
		}
		h.Class = c
		h.Snippet = capBytes(h.Snippet, SnippetCap)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return hits, x.count(hits)
}

func (x *Index) count(hits []Hit) error {
	at := x.now().UTC().Format(time.RFC3339)
	var errs []error
	for _, h := range hits {
		if h.Note == "" {
			continue
		}
		x.mu.Lock()
		_, err := x.db.Exec(`INSERT INTO note_hits(id, hits, last_found) VALUES(?, 1, ?)
			ON CONFLICT(id) DO UPDATE SET hits = hits + 1, last_found = excluded.last_found`, h.Note, at)
		x.mu.Unlock()
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// NoteHits returns how often a note was recalled and when last.
func (x *Index) NoteHits(id string) (int, string, error) {
	var n int
	var at string
	err := x.db.QueryRow(`SELECT hits, last_found FROM note_hits WHERE id = ?`, id).Scan(&n, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	return n, at, err
}

func capBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
