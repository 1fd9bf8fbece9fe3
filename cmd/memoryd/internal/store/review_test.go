package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// A note from a session above private is listed with its class and is
// never promoted: identity is in every prompt.
func TestPromoteRefusesAbovePrivate(t *testing.T) {
	s := open(t)
	bad := Caller{Session: "s2", Taint: dataclass.Secret, Untrusted: true}
	do(t, s, bad, `{"action":"add","file":"user","text":"The owner's PIN is 1234."}`)
	items := s.Review()
	if len(items) != 1 || items[0].Class != dataclass.Secret {
		t.Fatalf("review = %+v, want the note with class secret", items)
	}
	_, err := s.Decide("n1", "promote", "")
	var r *Refused
	if !errors.As(err, &r) || !strings.Contains(r.Msg, "holding secret data") || !strings.Contains(r.Msg, "see docs/runbook.md#memory-promote-refused") {
		t.Errorf("promote of a secret note = %v", err)
	}
	if file(t, s, User) != "" {
		t.Errorf("user.md = %q", file(t, s, User))
	}
	if _, err := s.Decide("n1", "drop", ""); err != nil {
		t.Errorf("drop = %v", err)
	}
}

// The tool's answer to an add from a session holding secret data does not
// promise a review it cannot have.
func TestSecretAddMessage(t *testing.T) {
	s := open(t)
	out := do(t, s, Caller{Session: "s3", Taint: dataclass.Secret}, `{"action":"add","file":"user","text":"The owner's PIN."}`)
	if strings.Contains(out, "promote it") || !strings.Contains(out, "can never be promoted") {
		t.Errorf("secret add = %q", out)
	}
	if len(s.Review()) != 0 {
		t.Errorf("review = %+v", s.Review())
	}
	out = do(t, s, Caller{Session: "s4", Taint: dataclass.Private, Untrusted: true}, `{"action":"add","file":"user","text":"Tea."}`)
	if !strings.Contains(out, "bxctl memory review") || len(s.Review()) != 1 {
		t.Errorf("untrusted add = %q, review %+v", out, s.Review())
	}
}

// An entry promoted (before the class check existed) from a secret note
// leaves identity with that class, not private.
func TestLeavingEntryKeepsClass(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memory")
	s, err := Open(dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	hdr := func(id, kind, class, ref string) string {
		return `<!-- note {"id":"` + id + `","at":"x","session":"s1","kind":"` + kind + `","untrusted":true,"class":"` + class + `","file":"user.md","ref":"` + ref + `"} -->` + "\n"
	}
	notes := hdr("n1", "note", "secret", "") + "The PIN is 1234.\n\n" + hdr("n2", "review", "private", "n1") + "promote\n\n"
	os.WriteFile(filepath.Join(dir, Notes), []byte(notes), 0o600)
	os.WriteFile(filepath.Join(dir, User), []byte("Tea.\n§\nThe PIN is 1234.\n"), 0o600)
	s = open2(t, dir)
	do(t, s, clean, `{"action":"remove","file":"user","old":"PIN"}`)
	do(t, s, clean, `{"action":"remove","file":"user","old":"Tea"}`)
	got := s.Notes()
	if len(got) != 4 || got[2].Text != "The PIN is 1234." || got[2].Class != dataclass.Secret || got[3].Class != dataclass.Private {
		t.Errorf("notes = %+v, want the PIN dropped as secret, tea as private", got)
	}
}

func open2(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A session named "owner" is not the owner in the journal.
func TestSessionNamedOwner(t *testing.T) {
	s := open(t)
	do(t, s, Caller{Session: "owner", Taint: dataclass.Private}, `{"action":"add","file":"user","text":"Tea."}`)
	if _, err := s.Undo(User); err != nil {
		t.Fatal(err)
	}
	edits, _ := ReadJournal(filepath.Join(s.Dir(), "edits", JournalName))
	if len(edits) != 2 || edits[0].Session != "owner" || edits[1].Session != wire.OwnerSession || edits[1].Session == edits[0].Session {
		t.Errorf("journal = %+v, want the session and the owner told apart", edits)
	}
}

// TestDecisionsJournalled: a promote and a drop are each a journal
// record of the owner, naming the review note that holds the decision;
// a promote also journals the identity edit it made.
func TestDecisionsJournalled(t *testing.T) {
	s := open(t)
	u := Caller{Session: "s1", Taint: dataclass.Private, Untrusted: true}
	do(t, s, u, `{"action":"note","text":"The owner likes rooibos."}`)
	do(t, s, u, `{"action":"note","text":"The owner likes mate."}`)
	if _, err := s.Decide("n1", "promote", User); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide("n2", "drop", ""); err != nil {
		t.Fatal(err)
	}
	edits, _ := ReadJournal(filepath.Join(s.Dir(), "edits", JournalName))
	var got []string
	for _, e := range edits {
		got = append(got, e.Session+" "+e.File+" "+e.Action+" "+e.Note)
	}
	want := []string{"s1 notes.md note n1", "s1 notes.md note n2", "(owner) user.md add ", "(owner) notes.md review n3", "(owner) notes.md review n4"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("journal = %q, want %q", got, want)
	}
	notes := s.Notes()
	if notes[2].Ref != "n1" || notes[2].Text != "promote" || notes[3].Ref != "n2" || notes[3].Text != "drop" {
		t.Errorf("review notes = %+v", notes[2:])
	}
}
