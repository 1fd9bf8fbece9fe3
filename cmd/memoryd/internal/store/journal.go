package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
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
	if err := s.writeDurable(filepath.Join("edits", fmt.Sprintf("%d.before", seq)), before); err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	e := wire.MemoryEdit{Seq: seq, At: s.now().UTC().Format("2006-01-02T15:04:05Z"), Session: session, File: file,
		Action: action, Before: sum(before), After: sum(after)}
	if _, err := s.journal.Append(e); err != nil {
		return 0, err
	}
	return seq, s.writeAtomic(file, after)
}

// ActionVoid is the journal's correction of an edit that was journalled
// but never reached its file (memoryd stopped between the two): Undoes
// names it, and undo passes over it.
const ActionVoid = "void"

// reconcile checks the journal's last line against its file when the
// store opens. An identity edit is journalled before its file is
// replaced, so a crash between leaves a line whose After the file never
// got; while the file still holds its Before, that edit is voided in the
// journal, so undo does not stop at it forever. The caller holds s.mu or
// owns s.
func (s *Store) reconcile() error {
	edits, err := ReadJournal(filepath.Join(s.dir, "edits", JournalName))
	if err != nil || len(edits) == 0 {
		return err
	}
	e := edits[len(edits)-1]
	if (e.File != Memory && e.File != User) || e.Action == ActionVoid || e.Before == e.After {
		return nil
	}
	cur, err := s.read(e.File)
	if err != nil {
		return err
	}
	if c := sum(cur); c == e.After || c != e.Before {
		return nil // applied, or changed by hand since: undo will say so
	}
	_, err = s.journal.Append(wire.MemoryEdit{Seq: int64(s.journal.Lines() + 1), At: s.now().UTC().Format("2006-01-02T15:04:05Z"),
		Session: e.Session, File: e.File, Action: ActionVoid, Before: e.Before, After: e.Before, Undoes: e.Seq})
	return err
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
	voided := map[int64]bool{}
	var last *wire.MemoryEdit
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		if e.File != file {
			continue
		}
		switch {
		case e.Action == ActionVoid:
			voided[e.Undoes] = true
			continue
		case voided[e.Seq]:
			continue
		case e.Undoes != 0:
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
	if err := s.writeDurable(filepath.Join("edits", fmt.Sprintf("%d.before", seq)), cur); err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	e := wire.MemoryEdit{Seq: seq, At: s.now().UTC().Format("2006-01-02T15:04:05Z"), Session: wire.OwnerSession, File: file,
		Action: "undo", Before: sum(cur), After: last.Before, Undoes: last.Seq}
	if _, err := s.journal.Append(e); err != nil {
		return "", err
	}
	if err := s.writeAtomic(file, string(before)); err != nil {
		return "", err
	}
	return fmt.Sprintf("memory/%s: edit %d (%s) undone; it applies from the next session", file, last.Seq, last.Action), nil
}
