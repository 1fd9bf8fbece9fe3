package store

import (
	"fmt"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/sanitize"
)

// reviewable reports whether a note waits for the owner: a staged
// identity write, or an untrusted note (false alarms are reviewable too).
func reviewable(n Note) string {
	switch {
	case n.Kind == KindStaged:
		return "staged"
	case n.Kind == KindNote && n.Untrusted:
		return "untrusted"
	}
	return ""
}

// Review lists the staged writes and untrusted notes the owner has not
// decided yet, oldest first.
func (s *Store) Review() []wire.ReviewItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.review()
}

// review is Review; the caller holds s.mu.
func (s *Store) review() []wire.ReviewItem {
	decided := map[string]bool{}
	for k := range s.forgotten() {
		decided[k] = true // a forgotten note waits for nothing
	}
	for _, n := range s.notes {
		if n.Kind == KindReview {
			decided[n.Ref] = true
		}
	}
	items := []wire.ReviewItem{}
	for _, n := range s.notes {
		if k := reviewable(n); k != "" && !decided[n.ID] {
			items = append(items, wire.ReviewItem{ID: n.ID, Kind: k, File: n.File, Session: n.Session, At: n.At, Class: n.Class, Text: n.Text})
		}
	}
	return items
}

// entryClass is the data class of an identity entry leaving file: the
// class of the note it was promoted from, if any, and never below private
// (identity is in every prompt). The caller holds s.mu.
func (s *Store) entryClass(file, text string) dataclass.Class {
	class := dataclass.Private
	byID := map[string]Note{}
	for _, n := range s.notes {
		byID[n.ID] = n
		if n.Kind != KindReview || n.Text != "promote" || n.File != file {
			continue
		}
		if from, ok := byID[n.Ref]; ok && from.Text == text {
			class = dataclass.Join(class, from.Class)
		}
	}
	return class
}

// Decide is the owner's answer to a review item: "promote" adds its text
// to an identity file (file, or the one it was meant for) through the
// same checks and journal as any edit; "drop" leaves it a note. Either
// way a review note records the decision; nothing is deleted.
func (s *Store) Decide(id, action, file string) (string, error) {
	if action != "promote" && action != "drop" {
		return "", refuse("review: the action must be promote or drop")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var item *wire.ReviewItem
	for _, it := range s.review() {
		if it.ID == id {
			item = &it
		}
	}
	if item == nil {
		return "", refuse("review: %s is not a staged write or untrusted note waiting for review (bxctl memory review lists them); see docs/runbook.md#memory-undo-refused", id)
	}
	if file == "" {
		file = item.File
	}
	msg := fmt.Sprintf("%s dropped; it stays in notes.md", id)
	if action == "promote" {
		if file != Memory && file != User {
			return "", refuse("review: promote needs the file, memory.md or user.md; see docs/runbook.md#memory-undo-refused")
		}
		if !item.Class.AtMost(dataclass.Private) {
			return "", refuse("review: %s came from a session holding %s data, and identity is in every prompt, so it cannot be promoted; it stays in notes.md, recallable; see docs/runbook.md#memory-promote-refused", id, item.Class)
		}
		if err := sanitize.Check(item.Text); err != nil {
			return "", refuse("review: the write check refused %s: %v; see docs/runbook.md#memory-write-refused", id, err)
		}
		out, err := s.edit(wire.OwnerSession, file, toolargs.MemoryEdit{Action: "add", Text: item.Text})
		if err != nil {
			return "", err
		}
		msg = fmt.Sprintf("%s promoted: %s", id, out)
	}
	if _, err := s.appendNote(Note{Session: wire.OwnerSession, Kind: KindReview, Class: dataclass.Private, File: file, Ref: id, Text: action}); err != nil {
		return "", err
	}
	return msg, nil
}
