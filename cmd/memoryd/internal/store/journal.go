package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"wntrmute.dev/boxmaker/pkg/jsonl"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// JournalName is the journal's file name in edits/.
const JournalName = "journal.jsonl"

// ReadJournal decodes every line of a journal strictly.
func ReadJournal(path string) ([]wire.MemoryEdit, error) {
	var out []wire.MemoryEdit
	err := jsonl.Scan(path, jsonl.DefaultMaxLine, func(n int, b []byte) error {
		var e wire.MemoryEdit
		if err := strict.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
		out = append(out, e)
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

func (s *Store) path(f string) string { return filepath.Join(s.dir, f) }

// commit journals an identity edit and then replaces the file: the
// previous content is kept in edits/<seq>.before first, so the journal
// never names an edit that cannot be undone. The caller holds s.mu.
func (s *Store) commit(session, file, action, before, after string) (int64, error) {
	seq := int64(s.journal.Lines() + 1)
	bpath := filepath.Join(s.dir, "edits", fmt.Sprintf("%d.before", seq))
	if err := os.WriteFile(bpath, []byte(before), 0o600); err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	e := wire.MemoryEdit{Seq: seq, At: s.now().UTC().Format("2006-01-02T15:04:05Z"), Session: session, File: file,
		Action: action, Before: sum(before), After: sum(after)}
	if _, err := s.journal.Append(e); err != nil {
		return 0, err
	}
	return seq, s.writeAtomic(file, after)
}

// UndoRefused explains why an undo could not be made.
type UndoRefused struct{ Why string }

func (e *UndoRefused) Error() string {
	return "undo refused: " + e.Why + "; see docs/runbook.md#memory-undo-refused"
}

// Undo reverts the latest edit of an identity file not yet undone. It is
// refused when the file changed since that edit (by hand, say): undo
// restores the journal's own record, never guesses over an owner's edit.
func (s *Store) Undo(file string) (string, error) {
	if file != Memory && file != User {
		return "", &UndoRefused{Why: fmt.Sprintf("%q is not memory.md or user.md (soul.md is yours to edit; notes.md is append-only)", file)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	edits, err := ReadJournal(filepath.Join(s.dir, "edits", JournalName))
	if err != nil {
		return "", err
	}
	undone := map[int64]bool{}
	var last *wire.MemoryEdit
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		if e.File != file {
			continue
		}
		if e.Undoes != 0 {
			undone[e.Undoes] = true
			continue
		}
		if !undone[e.Seq] {
			last = &edits[i]
			break
		}
	}
	if last == nil {
		return "", &UndoRefused{Why: "memory/" + file + " has no edit left to undo"}
	}
	cur, err := s.read(file)
	if err != nil {
		return "", err
	}
	if sum(cur) != last.After {
		return "", &UndoRefused{Why: fmt.Sprintf("memory/%s changed since edit %d (by hand?), so undoing it would lose that change", file, last.Seq)}
	}
	before, err := os.ReadFile(filepath.Join(s.dir, "edits", fmt.Sprintf("%d.before", last.Seq)))
	if err != nil {
		return "", fmt.Errorf("undo: %w", err)
	}
	if sum(string(before)) != last.Before {
		return "", &UndoRefused{Why: fmt.Sprintf("edits/%d.before does not match the journal", last.Seq)}
	}
	seq := int64(s.journal.Lines() + 1)
	bpath := filepath.Join(s.dir, "edits", fmt.Sprintf("%d.before", seq))
	if err := os.WriteFile(bpath, []byte(cur), 0o600); err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	e := wire.MemoryEdit{Seq: seq, At: s.now().UTC().Format("2006-01-02T15:04:05Z"), Session: "owner", File: file,
		Action: "undo", Before: sum(cur), After: last.Before, Undoes: last.Seq}
	if _, err := s.journal.Append(e); err != nil {
		return "", err
	}
	if err := s.writeAtomic(file, string(before)); err != nil {
		return "", err
	}
	return fmt.Sprintf("memory/%s: edit %d (%s) undone; it applies from the next session", file, last.Seq, last.Action), nil
}
