package recall

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"time"
	"unicode"
)

// Identity entries are in every prompt, so recall never returns them;
// what it keeps is how often a recall's query names one. An entry is
// found by a query when it holds every word of the query (letters and
// digits, case folded, two or more characters long), the same rule as
// recall's first, all-words pass. Counts are kept per file and entry
// text (by its SHA-256): a rewritten entry starts again from zero, and,
// like the note counts, they live only in the index (Rebuild keeps them;
// deleting index/ loses them, which costs the tiering job its history,
// never a memory).
const identitySchema = `CREATE TABLE IF NOT EXISTS identity_hits(file TEXT NOT NULL, entry TEXT NOT NULL, hits INTEGER NOT NULL, last_found TEXT NOT NULL, PRIMARY KEY(file, entry));`

// EntryHits is one identity entry's count.
type EntryHits struct {
	Hits      int64
	LastFound string // RFC 3339, "" if never
}

// queryWords are a query's distinct words, case folded, without
// recall's stopwords unless nothing else is left.
func queryWords(q string) []string {
	seen := map[string]bool{}
	var out, stop []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len([]rune(w)) < 2 || seen[w] {
			continue
		}
		seen[w] = true
		if stopwords[w] {
			stop = append(stop, w)
		} else {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return stop
	}
	return out
}

// found reports whether entry holds every word of words.
func found(entry string, words []string) bool {
	if len(words) == 0 {
		return false
	}
	have := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(entry), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		have[w] = true
	}
	for _, w := range words {
		if !have[w] {
			return false
		}
	}
	return true
}

func entryKey(text string) string {
	h := sha256.Sum256([]byte(strings.TrimSpace(text)))
	return hex.EncodeToString(h[:])
}

// CountIdentity counts one recall of query against the identity entries
// of each file (file name to entries, in file order).
func (x *Index) CountIdentity(query string, files map[string][]string) error {
	words := queryWords(query)
	at := x.now().UTC().Format(time.RFC3339)
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	for file, entries := range files {
		for _, e := range entries {
			if !found(e, words) {
				continue
			}
			_, err := x.db.Exec(`INSERT INTO identity_hits(file, entry, hits, last_found) VALUES(?, ?, 1, ?)
				ON CONFLICT(file, entry) DO UPDATE SET hits = hits + 1, last_found = excluded.last_found`, file, entryKey(e), at)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// IdentityHits returns the count of each entry of file, in order.
func (x *Index) IdentityHits(file string, entries []string) ([]EntryHits, error) {
	out := make([]EntryHits, len(entries))
	for i, e := range entries {
		err := x.db.QueryRow(`SELECT hits, last_found FROM identity_hits WHERE file = ? AND entry = ?`, file, entryKey(e)).Scan(&out[i].Hits, &out[i].LastFound)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
	}
	return out, nil
}
