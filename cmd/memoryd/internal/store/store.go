// Package store is memoryd's memory/ directory: the three identity files,
// the append-only notes.md, and the journal of every write in edits/.
//
// Invariants:
//   - soul.md is written only by the owner; the memory tool edits only
//     memory.md and user.md, and only for a session that has read no
//     untrusted content and holds nothing above private (an add from any
//     other session becomes a note; the other edits are refused);
//   - every write passes [sanitize.Check] and its file's limit, is
//     journalled in edits/ before the file changes, and replaces the file
//     atomically (temp file, fsync, rename);
//   - nothing is deleted: what leaves an identity file is appended to
//     notes.md as moved or dropped, and edits/ keeps each file's previous
//     content, so the latest edit of a file can be undone;
//   - the identity block is checked again each time it is built: a file
//     edited by hand that fails the check or its limit is refused, never
//     put in a prompt; so is a soul.md that anyone but root and memoryd's
//     user can have written (package ownership's rule).
//
// A Store's methods are safe for concurrent use; one mutex orders every
// write.
package store

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/sanitize"
)

//go:embed soul.md
var defaultSoul string

// The identity files, in the order of the identity block, and the notes.
const (
	Soul   = "soul.md"
	Memory = "memory.md"
	User   = "user.md"
	Notes  = "notes.md"
)

// Identity lists the identity files in block order.
var Identity = []string{Soul, Memory, User}

// Limit is each identity file's size limit, in characters.
var Limit = wire.IdentityLimit

// Separator divides the entries of an identity file: a line holding only §.
const Separator = "\n§\n"

// Store is one memory/ directory.
type Store struct {
	dir   string
	stage bool
	now   func() time.Time

	mu      sync.Mutex // orders every write; guards the fields below
	journal *jsonl.Writer
	notes   []Note
	top     int                   // the highest note id number
	counts  map[string]epochCount // notes per session in its epoch
}

// Open opens (creating on first use) the memory directory dir. soul.md
// starts from the repository's generic file; memory.md and user.md start
// empty. With stage set, identity writes are staged for the owner's
// review instead of applied.
func Open(dir string, stage bool, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(filepath.Join(dir, "edits"), 0o700); err != nil {
		return nil, fmt.Errorf("open memory: %w", err)
	}
	for _, f := range []string{Soul, Memory, User, Notes} {
		body := ""
		if f == Soul {
			body = defaultSoul
		}
		fh, err := os.OpenFile(filepath.Join(dir, f), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open memory: %w", err)
		}
		_, werr := fh.WriteString(body)
		if err := errors.Join(werr, fh.Sync(), fh.Close()); err != nil {
			return nil, fmt.Errorf("open memory: %w", err)
		}
	}
	notes, err := ReadNotes(filepath.Join(dir, Notes))
	if err != nil {
		return nil, err
	}
	j, err := jsonl.Open(filepath.Join(dir, "edits", JournalName))
	if err != nil {
		return nil, fmt.Errorf("open memory journal: %w", err)
	}
	s := &Store{dir: dir, stage: stage, now: now, journal: j, notes: notes, counts: map[string]epochCount{}}
	for _, n := range notes {
		s.noteID(n.ID)
	}
	if err := s.reconcile(); err != nil {
		j.Close()
		return nil, fmt.Errorf("open memory journal: %w", err)
	}
	return s, nil
}

// Close closes the journal.
func (s *Store) Close() error { return s.journal.Close() }

// Dir is the memory directory.
func (s *Store) Dir() string { return s.dir }

// Notes returns a copy of the notes, in file order.
func (s *Store) Notes() []Note {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Note(nil), s.notes...)
}

// FileRefused is a hand-edited identity file that fails the write check
// or its limit when the identity block is built.
type FileRefused struct {
	File string
	Why  string
}

func (e *FileRefused) Error() string {
	return fmt.Sprintf("memory/%s was refused when the identity block was built: %s; see docs/runbook.md#memory-file-refused", e.File, e.Why)
}

// IdentityBlock reads and checks the three identity files and returns the
// block for a new epoch's baseline: each file under a heading that says
// how full it is.
func (s *Store) IdentityBlock() (string, error) {
	var b strings.Builder
	b.WriteString("# Identity\n")
	for _, f := range Identity {
		text, err := s.read(f)
		if err != nil {
			return "", err
		}
		if err := sanitize.Check(text); err != nil {
			return "", &FileRefused{File: f, Why: err.Error()}
		}
		n := utf8.RuneCountInString(text)
		if n > Limit[f] {
			return "", &FileRefused{File: f, Why: fmt.Sprintf("%d characters, over its limit of %d", n, Limit[f])}
		}
		fmt.Fprintf(&b, "\n## %s (%d/%d characters)\n", f, n, Limit[f])
		if strings.TrimSpace(text) == "" {
			b.WriteString("(empty)\n")
		} else {
			b.WriteString(strings.TrimSpace(text) + "\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func (s *Store) read(f string) (string, error) {
	if f == Soul {
		return s.readSoul()
	}
	b, err := os.ReadFile(filepath.Join(s.dir, f))
	if err != nil {
		return "", fmt.Errorf("read memory/%s: %w", f, err)
	}
	return string(b), nil
}

// readSoul reads soul.md, the identity file only the owner writes, under
// package ownership's rule: the file, a link's target and every directory
// above them owned by root or memoryd's own user (memory/ is memoryd's
// directory) and writable by no one else. memory.md and user.md are
// memoryd's own writes, in the directory this check already covers.
func (s *Store) readSoul() (string, error) {
	b, err := ownership.Self().ReadFile(filepath.Join(s.dir, Soul), maxSoulBytes)
	var ue *ownership.UnsafeError
	var big *ownership.TooLargeError
	switch {
	case errors.As(err, &ue):
		return "", &FileRefused{File: Soul, Why: ue.Explain() + ": only root and memoryd's user may write soul.md or a directory above it"}
	case errors.As(err, &big):
		return "", &FileRefused{File: Soul, Why: fmt.Sprintf("%s, over its limit of %d characters", big, Limit[Soul])}
	}
	if err != nil {
		return "", fmt.Errorf("read memory/%s: %w", Soul, err)
	}
	return string(b), nil
}

// maxSoulBytes bounds the read of soul.md: its limit in characters, each
// at most four bytes; the limit itself is checked after.
var maxSoulBytes = 4 * Limit[Soul]

// Entries splits an identity file into its entries: only a line holding
// nothing but § separates them, so a § inside a line ("see §4 of the
// lease") is text.
func Entries(text string) []string {
	var out []string
	var cur []string
	flush := func() {
		if e := strings.TrimSpace(strings.Join(cur, "\n")); e != "" {
			out = append(out, e)
		}
		cur = nil
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "§" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

// Join writes entries as an identity file.
func Join(entries []string) string {
	if len(entries) == 0 {
		return ""
	}
	return strings.Join(entries, Separator) + "\n"
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// writeAtomic replaces memory/f with text: temp file, fsync, rename,
// fsync of the directory.
func (s *Store) writeAtomic(f, text string) error {
	if err := s.writeDurable(f, text); err != nil {
		return fmt.Errorf("write memory/%s: %w", f, err)
	}
	return nil
}

// writeDurable replaces the file rel (relative to the memory directory)
// with text: temp file, fsync, rename, fsync of its directory. A crash
// leaves the old content or the new, never a part.
func (s *Store) writeDurable(rel, text string) error {
	path := filepath.Join(s.dir, rel)
	tmp := path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := fh.WriteString(text)
	if err := errors.Join(werr, fh.Sync(), fh.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
