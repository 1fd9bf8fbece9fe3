package store

import (
	"reflect"
	"testing"
)

func TestEntries(t *testing.T) {
	for _, tt := range []struct {
		text string
		want []string
	}{
		{"", nil},
		{"see §4 of the lease\n", []string{"see §4 of the lease"}},
		{"a §\n§\nb\n", []string{"a §", "b"}},
		{"§ a\n  §  \nb\nc\n§\n", []string{"§ a", "b\nc"}},
		{"one\n§\n\n§\ntwo", []string{"one", "two"}},
	} {
		if got := Entries(tt.text); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Entries(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

// An entry with a § inside a line stays one entry through an edit.
func TestSectionSignInEntry(t *testing.T) {
	s := open(t)
	do(t, s, clean, `{"action":"add","file":"user","text":"Rent terms: see §4 of the lease."}`)
	do(t, s, clean, `{"action":"add","file":"user","text":"The owner prefers tea."}`)
	do(t, s, clean, `{"action":"consolidate","file":"user","plan":[{"op":"keep"},{"op":"drop"}]}`)
	if got := file(t, s, User); got != "Rent terms: see §4 of the lease.\n" {
		t.Errorf("user.md = %q", got)
	}
}

// A rewrite keeps the text it replaces in notes.md; a rewrite to the same
// text adds nothing.
func TestRewriteKeepsOriginal(t *testing.T) {
	s := open(t)
	do(t, s, clean, `{"action":"add","file":"memory","text":"The backup disk is Ferrous."}`)
	do(t, s, clean, `{"action":"add","file":"memory","text":"Reports go out on Fridays."}`)
	do(t, s, clean, `{"action":"consolidate","file":"memory","plan":[{"op":"rewrite","text":"Backups: the disk Ferrous."},{"op":"rewrite","text":"Reports go out on Fridays."}]}`)
	notes := s.Notes()
	if len(notes) != 1 || notes[0].Kind != KindDropped || notes[0].Text != "The backup disk is Ferrous." || notes[0].File != Memory {
		t.Errorf("notes = %+v, want the rewritten entry's original, dropped", notes)
	}
	if got := file(t, s, Memory); got != "Backups: the disk Ferrous.\n§\nReports go out on Fridays.\n" {
		t.Errorf("memory.md = %q", got)
	}
}
