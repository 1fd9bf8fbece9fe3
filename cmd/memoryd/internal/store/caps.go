package store

import (
	"unicode/utf8"
)

// The caps on notes the model writes. notes.md is append-only and is
// indexed for recall, and note is open to every session, untrusted ones
// included: without a cap one injected page could have the model flood
// notes.md and the index, and bury real memories under its own.
const (
	// MaxNoteChars caps one note's text, in characters (an identity add
	// turned into a note included; a staged add is bounded by its
	// file's limit instead).
	MaxNoteChars = 1000
	// MaxNotesPerEpoch caps the notes one session writes in one epoch
	// (note, an identity add turned into a note, a staged add).
	MaxNotesPerEpoch = 20
)

// epochCount is how many notes a session has written in its epoch.
type epochCount struct {
	epoch int64 // -1: not known since memoryd started
	notes int
}

// StartEpoch tells the store that a session's epoch has begun (loopd asked
// for its identity block): its note count starts again from zero. An
// older epoch than the one known does not reset it.
func (s *Store) StartEpoch(session string, epoch int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.counts[session]; ok && c.epoch >= epoch {
		return
	}
	s.counts[session] = epochCount{epoch: epoch}
}

// checkNoteCap refuses a note over the caps. Until memoryd learns a
// session's epoch (after a restart), every note the session ever wrote
// counts, which fails closed. The caller holds s.mu.
func (s *Store) checkNoteCap(session string, note Note) error {
	if n := utf8.RuneCountInString(note.Text); note.Kind == KindNote && n > MaxNoteChars {
		return refuse("memory: a note is at most %d characters, this one is %d; write a shorter note; see docs/runbook.md#memory-note-limit", MaxNoteChars, n)
	}
	c, ok := s.counts[session]
	if !ok {
		c = epochCount{epoch: -1}
		for _, n := range s.notes {
			if n.Session == session && (n.Kind == KindNote || n.Kind == KindStaged) {
				c.notes++
			}
		}
		s.counts[session] = c
	}
	if c.notes >= MaxNotesPerEpoch {
		return refuse("memory: this session has written %d notes in this epoch, the most it may; no more notes until the next epoch; see docs/runbook.md#memory-note-limit", c.notes)
	}
	return nil
}

// countNote counts a note the model wrote. The caller holds s.mu.
func (s *Store) countNote(session string) {
	c := s.counts[session]
	c.notes++
	s.counts[session] = c
}

// modelNote appends a note the model wrote, within the caps. The caller
// holds s.mu.
func (s *Store) modelNote(session string, n Note) (Note, error) {
	if err := s.checkNoteCap(session, n); err != nil {
		return Note{}, err
	}
	n, err := s.appendNote(n)
	if err != nil {
		return Note{}, err
	}
	s.countNote(session)
	return n, nil
}

// NotesFrom returns a copy of the notes from the i-th on, in file order,
// and the count of all notes: an indexer that remembers the count sends
// each note once.
func (s *Store) NotesFrom(i int) ([]Note, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i > len(s.notes) {
		i = len(s.notes)
	}
	return append([]Note(nil), s.notes[i:]...), len(s.notes)
}
