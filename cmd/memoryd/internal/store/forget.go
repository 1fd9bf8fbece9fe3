package store

import (
	"fmt"
	"regexp"
	"strconv"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Forgetting appends, never deletes: a tombstone is a note of kind
// forget whose Ref is the key of what is forgotten (a note's id, or a
// session record as recall names it, "session s1 epoch 0 turn 2 record
// 5"), and an unforget note takes it back. The latest of the two for a
// key wins. Both are journalled like every note, so the journal shows
// who forgot what and when; the index and recall honour the set
// [Store.Forgotten] returns, and a rebuilt index is made from the same
// files, so a reindex cannot bring an entry back.
const (
	KindForget   = "forget"
	KindUnforget = "unforget"
)

// RecordKey is the key of a session record: the words recall shows it
// with.
func RecordKey(session string, epoch, turn int64, record int) string {
	return fmt.Sprintf("session %s epoch %d turn %d record %d", session, epoch, turn, record)
}

// NoteID matches a note's id.
var NoteID = regexp.MustCompile(`^n[1-9][0-9]{0,9}$`)

// recordID matches a session record's key.
var recordID = regexp.MustCompile(`^session (\S{1,64}) epoch (0|[1-9][0-9]{0,8}) turn (0|[1-9][0-9]{0,9}) record ([1-9][0-9]{0,9})$`)

// ParseRecordKey parses a session record's key.
func ParseRecordKey(key string) (session string, epoch, turn int64, record int, ok bool) {
	m := recordID.FindStringSubmatch(key)
	if m == nil || wire.CheckSessionID(m[1]) != nil {
		return "", 0, 0, 0, false
	}
	epoch, _ = strconv.ParseInt(m[2], 10, 64)
	turn, _ = strconv.ParseInt(m[3], 10, 64)
	r, _ := strconv.Atoi(m[4])
	return m[1], epoch, turn, r, true
}

// Forgotten returns every key forgotten now, with its tombstone's id.
func (s *Store) Forgotten() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forgotten()
}

// forgotten is Forgotten; the caller holds s.mu.
func (s *Store) forgotten() map[string]string {
	out := map[string]string{}
	for _, n := range s.notes {
		switch n.Kind {
		case KindForget:
			out[n.Ref] = n.ID
		case KindUnforget:
			delete(out, n.Ref)
		}
	}
	return out
}

// Tombstone reports whether a note is a forget or unforget record,
// which is never indexed, filed or reviewed.
func (n Note) Tombstone() bool { return n.Kind == KindForget || n.Kind == KindUnforget }

// Note returns the note with id, if notes.md has it.
func (s *Store) Note(id string) (Note, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.notes {
		if n.ID == id {
			return n, true
		}
	}
	return Note{}, false
}

// Forget tombstones key (a note's id, or a session record's key the
// caller has checked exists), or with undo takes the latest tombstone
// back. It returns the tombstone (or unforget) note.
func (s *Store) Forget(key string, undo bool, by string) (Note, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if NoteID.MatchString(key) {
		var found *Note
		for i := range s.notes {
			if s.notes[i].ID == key {
				found = &s.notes[i]
			}
		}
		switch {
		case found == nil:
			return Note{}, refuse("forget: there is no note %s in notes.md; see docs/runbook.md#memory-forget-refused", key)
		case found.Kind == KindReview || found.Tombstone():
			return Note{}, refuse("forget: %s is a record of the owner's own decision (%s), not a memory; see docs/runbook.md#memory-forget-refused", key, found.Kind)
		}
	} else if _, _, _, _, ok := ParseRecordKey(key); !ok {
		return Note{}, refuse("forget: %q is not a note id (n12) or a session record as recall shows it (session s1 epoch 0 turn 2 record 5); an identity entry is removed with the memory tool or undone with bxctl memory undo; see docs/runbook.md#memory-forget-refused", key)
	}
	tomb, gone := s.forgotten()[key]
	kind := KindForget
	switch {
	case !undo && gone:
		return Note{}, refuse("forget: %s is forgotten already (tombstone %s); see docs/runbook.md#memory-forget-refused", key, tomb)
	case undo && !gone:
		return Note{}, refuse("forget --undo: %s is not forgotten; see docs/runbook.md#memory-forget-refused", key)
	case undo:
		kind = KindUnforget
	}
	text := kind
	if by != "" {
		text += " (" + by + ")"
	}
	return s.appendNote(Note{Session: wire.OwnerSession, Kind: kind, Class: dataclass.Public, Ref: key, Text: text})
}
