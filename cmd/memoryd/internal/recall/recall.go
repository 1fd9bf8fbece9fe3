// Package recall is memoryd's local index: SQLite FTS5 over the session
// logs and notes.md, behind the [Retriever] interface. Fleet memory
// (Honcho, package fleet) does not implement it: memd searches it beside
// the index and merges the hits (fleet.Merge).
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

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/truncate"

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
	MaxK       = toolargs.MaxRecallK // what a call may ask for (recall's arguments)
	DefaultK   = 5
	SnippetCap = 400 // bytes of one snippet
	maxWords   = 16
	// commonDocs: a word in more records than this is common; ranking
	// every record that has it would cost a scan, so common words only
	// narrow a query or, alone, find the most recent records.
	commonDocs = 2000
)

// Hit is one recalled item.
type Hit struct {
	Doc
	Snippet string

	rowid int64
}

// Retriever finds remembered items for a query. Implementations label
// every hit; callers taint the session with the hits' classes.
type Retriever interface {
	// project is the asking session's project ("" for none): only the
	// agent's own memory and that project's are searched.
	Recall(ctx context.Context, query string, k int, project string) ([]Hit, error)
}

var _ Retriever = (*Index)(nil)

// Index is the FTS5 index in one SQLite file.
type Index struct {
	db       *sql.DB
	maxClass dataclass.Class
	now      func() time.Time

	mu sync.Mutex // orders writers (SQLite allows one)

	goneMu sync.RWMutex    // guards gone
	gone   map[string]bool // forgotten keys (forget.go)
}

const schema = `
CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(text, source UNINDEXED, class UNINDEXED, session UNINDEXED,
	epoch UNINDEXED, turn UNINDEXED, record UNINDEXED, note UNINDEXED, project UNINDEXED, tokenize='unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS turns(session TEXT NOT NULL, epoch INTEGER NOT NULL, turn INTEGER NOT NULL, PRIMARY KEY(session, epoch, turn));
CREATE TABLE IF NOT EXISTS notes(id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS note_hits(id TEXT PRIMARY KEY, hits INTEGER NOT NULL, last_found TEXT NOT NULL);
` + identitySchema

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
	// An index made before projects has no project column: it is
	// disposable, so it is made again, and memoryd's catch-up fills it.
	if _, err := db.Exec(`SELECT project FROM docs LIMIT 0`); err != nil {
		if _, err := db.Exec(`DROP TABLE docs; DELETE FROM turns; DELETE FROM notes; ` + schema); err != nil {
			db.Close()
			return nil, fmt.Errorf("open index %s: making it again with projects: %w", path, err)
		}
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
			if x.forgotten(d) {
				continue
			}
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
		if k, _ := res.RowsAffected(); k == 0 || !d.Class.AtMost(x.maxClass) || x.forgotten(d) {
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
	_, err := tx.Exec(`INSERT INTO docs(text, source, class, session, epoch, turn, record, note, project) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.Text, d.Source, d.Class.String(), d.Session, d.Epoch, d.Turn, d.Record, d.Note, d.Project)
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

// stopwords are left out of a query when it has other words: they match
// nearly every record, rank nothing and cost a scan.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be but by did do does for from had has have he her his how i if in
		is it its me my of on or our she so that the their them they this to was we were what when where which who why
		will with you your`) {
		stopwords[w] = true
	}
}

// words cuts the model's query into at most maxWords quoted FTS5 terms,
// without stopwords unless the query is nothing else.
func words(query string) []string {
	all := wordRE.FindAllString(query, maxWords)
	var out []string
	for _, w := range all {
		if !stopwords[strings.ToLower(w)] {
			out = append(out, `"`+w+`"`)
		}
	}
	if len(out) == 0 {
		for _, w := range all {
			out = append(out, `"`+w+`"`)
		}
	}
	return out
}

// match is an FTS5 expression any of whose quoted words may match.
func match(query string) string { return strings.Join(words(query), " OR ") }

// Recall returns up to k hits for query, best first, from the agent's
// own memory and project's ("" for none), and counts the hits on notes.
func (x *Index) Recall(ctx context.Context, query string, k int, project string) ([]Hit, error) {
	if k <= 0 {
		k = DefaultK
	}
	k = min(k, MaxK)
	all := words(query)
	if len(all) == 0 {
		return nil, nil
	}
	var rare, common []string
	for _, w := range all {
		// How many records have the word, counted only up to the limit:
		// a full count would read a common word's whole posting list.
		var df int64
		err := x.db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT rowid FROM docs WHERE docs MATCH ? LIMIT ?)`, w, commonDocs+1).Scan(&df)
		if err != nil {
			return nil, fmt.Errorf("recall: %w", err)
		}
		if df > commonDocs {
			common = append(common, w)
		} else if df > 0 {
			rare = append(rare, w)
		}
	}
	// With rare words, records with all of them first, then with any,
	// ranked by bm25 over the rare words alone (bm25 reads the whole
	// posting list of every word it ranks by, so a common word would cost
	// a scan and tell little). A query of common words only gets the most
	// recent records that have them.
	var hits []Hit
	var err error
	switch {
	case len(rare) > 0:
		hits, err = x.query(ctx, project, strings.Join(rare, " AND "), "rank", k, nil)
		if err == nil && len(hits) < k && len(rare) > 1 {
			hits, err = x.query(ctx, project, strings.Join(rare, " OR "), "rank", k-len(hits), hits)
		}
	case len(common) > 0:
		hits, err = x.query(ctx, project, strings.Join(common, " AND "), "rowid DESC", k, nil)
		if err == nil && len(hits) < k && len(common) > 1 {
			hits, err = x.query(ctx, project, strings.Join(common, " OR "), "rowid DESC", k-len(hits), hits)
		}
	}
	if err != nil {
		return nil, err
	}
	return hits, x.count(hits)
}

// query appends to hits up to k hits for the FTS5 expression q, best
// first, skipping documents already in hits.
func (x *Index) query(ctx context.Context, project, q, order string, k int, hits []Hit) ([]Hit, error) {
	seen := map[int64]bool{}
	for _, h := range hits {
		seen[h.rowid] = true
	}
	// Another project's documents are never read: the filter is in the
	// query, not applied to its answer.
	rows, err := x.db.QueryContext(ctx, `SELECT rowid, snippet(docs, 0, '', '', '…', 40), text, source, class, session, epoch, turn, record, note, project
		FROM docs WHERE docs MATCH ? AND project IN ('', ?) ORDER BY `+order+` LIMIT ?`, q, project, k+len(hits))
	if err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	defer rows.Close()
	for rows.Next() && k > 0 {
		var h Hit
		var class string
		if err := rows.Scan(&h.rowid, &h.Snippet, &h.Text, &h.Source, &class, &h.Session, &h.Epoch, &h.Turn, &h.Record, &h.Note, &h.Project); err != nil {
			return nil, err
		}
		c, err := dataclass.Parse(class)
		if err != nil {
			return nil, fmt.Errorf("recall: index holds a bad class: %w", err)
		}
		h.Class = c
		h.Snippet = truncate.Ellipsis(h.Snippet, SnippetCap)
		if !seen[h.rowid] && !x.forgotten(h.Doc) {
			hits = append(hits, h)
			k--
		}
	}
	return hits, rows.Err()
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
