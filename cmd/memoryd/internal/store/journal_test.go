package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Crash states of an identity edit, made by hand: memoryd stopped after
// journalling the edit but before replacing the file (a phantom edit), or
// after writing edits/<seq>.before but before journalling.
func TestJournalCrashStates(t *testing.T) {
	t.Run("journalled, not applied", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "memory")
		s := open2(t, dir)
		do(t, s, clean, `{"action":"add","file":"user","text":"The owner prefers tea."}`)
		do(t, s, clean, `{"action":"add","file":"user","text":"The owner lives in Lisbon."}`)
		s.Close()
		// The second edit's rename never happened.
		os.WriteFile(filepath.Join(dir, User), []byte("The owner prefers tea.\n"), 0o600)
		s = open2(t, dir)
		edits, err := ReadJournal(filepath.Join(dir, "edits", JournalName))
		if err != nil || len(edits) != 3 || edits[2].Action != ActionVoid || edits[2].Undoes != 2 {
			t.Fatalf("journal = %+v, %v; want the phantom edit 2 voided", edits, err)
		}
		// Undo passes over the phantom to the edit that was applied.
		if msg, err := s.Undo(User); err != nil || !strings.Contains(msg, "edit 1 (add) undone") {
			t.Fatalf("Undo = %q, %v", msg, err)
		}
		if got := file(t, s, User); got != "" {
			t.Errorf("user.md = %q", got)
		}
		// Reopening again adds nothing: the journal now matches.
		s.Close()
		open2(t, dir)
		if again, _ := ReadJournal(filepath.Join(dir, "edits", JournalName)); len(again) != 4 {
			t.Errorf("journal = %+v", again)
		}
	})
	t.Run("undo journalled, not applied", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "memory")
		s := open2(t, dir)
		do(t, s, clean, `{"action":"add","file":"user","text":"The owner prefers tea."}`)
		if _, err := s.Undo(User); err != nil {
			t.Fatal(err)
		}
		s.Close()
		os.WriteFile(filepath.Join(dir, User), []byte("The owner prefers tea.\n"), 0o600)
		s = open2(t, dir)
		// The undo never happened, so edit 1 can still be undone.
		if msg, err := s.Undo(User); err != nil || !strings.Contains(msg, "edit 1 (add) undone") {
			t.Fatalf("Undo = %q, %v", msg, err)
		}
	})
	t.Run("before written, not journalled", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "memory")
		s := open2(t, dir)
		do(t, s, clean, `{"action":"add","file":"user","text":"The owner prefers tea."}`)
		s.Close()
		os.WriteFile(filepath.Join(dir, "edits", "2.before"), []byte("stale"), 0o600)
		os.WriteFile(filepath.Join(dir, "edits", "2.before.tmp"), []byte("torn"), 0o600)
		s = open2(t, dir)
		do(t, s, clean, `{"action":"add","file":"user","text":"The owner lives in Lisbon."}`)
		if _, err := s.Undo(User); err != nil {
			t.Fatalf("Undo = %v", err)
		}
		if got := file(t, s, User); got != "The owner prefers tea.\n" {
			t.Errorf("user.md = %q", got)
		}
	})
	t.Run("hand edit after a crash is not voided", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "memory")
		s := open2(t, dir)
		do(t, s, clean, `{"action":"add","file":"user","text":"The owner prefers tea."}`)
		s.Close()
		os.WriteFile(filepath.Join(dir, User), []byte("by hand\n"), 0o600)
		s = open2(t, dir)
		var ur *UndoRefused
		if _, err := s.Undo(User); !errors.As(err, &ur) || !strings.Contains(err.Error(), "changed since edit 1") {
			t.Errorf("Undo = %v", err)
		}
	})
}
