package store

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

var untrusted = Caller{Session: "s9", Taint: dataclass.Private, Untrusted: true}

// One note is at most MaxNoteChars characters, whether written with note
// or as an identity add an untrusted session turned into a note; the
// refusal names the cap and the runbook.
func TestNoteSizeCap(t *testing.T) {
	s := open(t)
	long := strings.Repeat("é", MaxNoteChars) // characters, not bytes
	do(t, s, untrusted, `{"action":"note","text":"`+long+`"}`)
	over := long + "x"
	refused(t, s, untrusted, `{"action":"note","text":"`+over+`"}`, "a note is at most 1000 characters, this one is 1001")
	refused(t, s, untrusted, `{"action":"add","file":"user","text":"`+over+`"}`, "see docs/runbook.md#memory-note-limit")
	if n := len(s.Notes()); n != 1 {
		t.Errorf("%d notes, want 1: a refused note must not be written", n)
	}
}

// A session writes at most MaxNotesPerEpoch notes in an epoch (note and
// an untrusted add alike); another session is not affected, and the next
// epoch starts from zero. An older epoch does not reset the count.
func TestNotesPerEpochCap(t *testing.T) {
	s := open(t)
	s.StartEpoch(untrusted.Session, 0)
	for i := range MaxNotesPerEpoch {
		action := `"action":"note"`
		if i%2 == 1 {
			action = `"action":"add","file":"memory"`
		}
		do(t, s, untrusted, fmt.Sprintf(`{%s,"text":"note %d"}`, action, i))
	}
	refused(t, s, untrusted, `{"action":"note","text":"one more"}`, "this session has written 20 notes in this epoch")
	refused(t, s, untrusted, `{"action":"add","file":"user","text":"one more"}`, "see docs/runbook.md#memory-note-limit")
	do(t, s, clean, `{"action":"note","text":"another session"}`)
	s.StartEpoch(untrusted.Session, 0)
	refused(t, s, untrusted, `{"action":"note","text":"same epoch again"}`, "no more notes until the next epoch")
	s.StartEpoch(untrusted.Session, 1)
	do(t, s, untrusted, `{"action":"note","text":"next epoch"}`)
	// Identity edits are not notes the model writes: they stay bounded by
	// the files' limits alone.
	for i := range MaxNotesPerEpoch + 1 {
		do(t, s, clean, fmt.Sprintf(`{"action":"add","file":"memory","text":"entry %d"}`, i))
	}
}

// After a restart memoryd does not know a session's epoch: every note the
// session wrote counts until loopd starts its next epoch (fail closed).
func TestNotesCapAfterRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memory")
	s := open2(t, dir)
	for i := range MaxNotesPerEpoch {
		do(t, s, untrusted, fmt.Sprintf(`{"action":"note","text":"note %d"}`, i))
	}
	s.Close()
	s = open2(t, dir)
	refused(t, s, untrusted, `{"action":"note","text":"after restart"}`, "this session has written 20 notes")
	s.StartEpoch(untrusted.Session, 3)
	do(t, s, untrusted, `{"action":"note","text":"next epoch"}`)
}

// NotesFrom returns only the notes after the ones already taken.
func TestNotesFrom(t *testing.T) {
	s := open(t)
	do(t, s, clean, `{"action":"note","text":"one"}`)
	do(t, s, clean, `{"action":"note","text":"two"}`)
	got, all := s.NotesFrom(1)
	if all != 2 || len(got) != 1 || got[0].Text != "two" {
		t.Errorf("NotesFrom(1) = %+v, %d", got, all)
	}
	if got, all := s.NotesFrom(2); len(got) != 0 || all != 2 {
		t.Errorf("NotesFrom(2) = %+v, %d", got, all)
	}
}
