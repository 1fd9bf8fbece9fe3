package store

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/sanitize"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// Caller is the session a memory call comes from, as brokerd tracks it.
type Caller struct {
	Session   string
	Taint     dataclass.Class
	Untrusted bool
}

// clean reports whether the caller may edit identity: it has read no
// untrusted content and holds nothing above private (identity is in every
// prompt, so a secret must not reach it).
func (c Caller) clean() bool { return !c.Untrusted && c.Taint.AtMost(dataclass.Private) }

// Refused is a call the tool refused: the model reads Msg.
type Refused struct{ Msg string }

func (e *Refused) Error() string { return e.Msg }

func refuse(format string, a ...any) error { return &Refused{Msg: fmt.Sprintf(format, a...)} }

// ParseArgs parses the memory tool's arguments with
// [toolargs.ParseMemoryEdit], the one parser of them, and refuses what it
// refuses in the model's words.
func ParseArgs(raw []byte) (toolargs.MemoryEdit, error) {
	a, err := toolargs.ParseMemoryEdit(raw)
	if err != nil {
		return toolargs.MemoryEdit{}, refuse("memory: %v", err)
	}
	return a, nil
}

// Do runs one memory tool call and returns what the model reads. A
// refusal is a *[Refused]; any other error is memoryd's own failure.
func (s *Store) Do(c Caller, raw []byte) (string, error) {
	a, err := ParseArgs(raw)
	if err != nil {
		return "", err
	}
	for _, t := range append([]string{a.Text}, stepTexts(a.Plan)...) {
		if t == "" {
			continue
		}
		if err := sanitize.Check(t); err != nil {
			return "", refuse("memory: the write check refused the text: %v; see docs/runbook.md#memory-write-refused", err)
		}
		if err := checkText(t); err != nil {
			return "", refuse("memory: %v; see docs/runbook.md#memory-write-refused", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	file := a.File + ".md"
	switch {
	case a.Action == "note":
		n, err := s.modelNote(c.Session, Note{Session: c.Session, Kind: KindNote, Untrusted: c.Untrusted, Class: c.Taint, Text: strings.TrimSpace(a.Text)})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("noted as %s (%s)", n.ID, n.Source()), nil
	case !c.clean() && a.Action == "add":
		n, err := s.modelNote(c.Session, Note{Session: c.Session, Kind: KindNote, Untrusted: c.Untrusted, Class: c.Taint, File: file, Text: strings.TrimSpace(a.Text)})
		if err != nil {
			return "", err
		}
		if !c.Taint.AtMost(dataclass.Private) {
			return fmt.Sprintf("this session holds %s data, so the entry was saved as note %s (%s), not in %s; identity is in every prompt, so it can never be promoted there; recall finds it", c.Taint, n.ID, n.Source(), file), nil
		}
		return fmt.Sprintf("this session has read untrusted content, so the entry was saved as note %s (%s), not in %s; the owner can review and promote it (bxctl memory review)", n.ID, n.Source(), file), nil
	case !c.clean():
		return "", refuse("memory: %s of identity is refused in a session that has read untrusted content or holds %s data; record a note instead; see docs/runbook.md#memory-identity-refused", a.Action, c.Taint)
	case s.stage && a.Action == "add":
		n, err := s.modelNote(c.Session, Note{Session: c.Session, Kind: KindStaged, Class: c.Taint, File: file, Text: strings.TrimSpace(a.Text)})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("staged as %s for the owner's review before it reaches %s", n.ID, file), nil
	case s.stage:
		return "", refuse("memory: identity writes are staged for the owner's review, and only add can be staged; see docs/runbook.md#memory-identity-refused")
	}
	return s.edit(c.Session, file, a)
}

func stepTexts(plan []toolargs.MemoryStep) []string {
	var out []string
	for _, st := range plan {
		out = append(out, st.Text)
	}
	return out
}

// edit applies an identity edit. The caller holds s.mu.
func (s *Store) edit(session, file string, a toolargs.MemoryEdit) (string, error) {
	cur, err := s.read(file)
	if err != nil {
		return "", err
	}
	entries := Entries(cur)
	var next []string
	var left []Note // entries leaving the file
	switch a.Action {
	case "add":
		next = append(entries, strings.TrimSpace(a.Text))
	case "replace", "remove":
		i, err := find(entries, a.Old)
		if err != nil {
			return "", err
		}
		left = append(left, Note{Kind: KindDropped, Text: entries[i]})
		next = append([]string(nil), entries...)
		if a.Action == "replace" {
			next[i] = strings.TrimSpace(a.Text)
		} else {
			next = append(next[:i], next[i+1:]...)
		}
	case "consolidate":
		if len(a.Plan) != len(entries) {
			return "", refuse("memory: consolidate needs one step per entry of %s: it has %d entries, the plan %d", file, len(entries), len(a.Plan))
		}
		for i, st := range a.Plan {
			switch {
			case st.Op == "keep" && st.Text == "":
				next = append(next, entries[i])
			case st.Op == "rewrite" && st.Text != "":
				next = append(next, strings.TrimSpace(st.Text))
				if strings.TrimSpace(st.Text) != entries[i] {
					// Nothing is deleted: the text it replaces is kept.
					left = append(left, Note{Kind: KindDropped, Text: entries[i]})
				}
			case st.Op == "move" && st.Text == "":
				left = append(left, Note{Kind: KindMoved, Text: entries[i]})
			case st.Op == "drop" && st.Text == "":
				left = append(left, Note{Kind: KindDropped, Text: entries[i]})
			default:
				return "", refuse("memory: consolidate step %d must be keep, move or drop without text, or rewrite with text", i+1)
			}
		}
	}
	after := Join(next)
	if n := utf8.RuneCountInString(after); n > Limit[file] {
		return "", refuse("memory: %s would be %d characters, over its limit of %d; make room with the consolidate action (move or drop entries) first; see docs/runbook.md#memory-over-limit", file, n, Limit[file])
	}
	for _, n := range left {
		n.Session, n.Class, n.File = session, s.entryClass(file, n.Text), file
		if _, err := s.appendNote(n); err != nil {
			return "", err
		}
	}
	seq, err := s.commit(session, file, a.Action, cur, after)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: %s done (edit %d, %d/%d characters); it applies from the next session", file, a.Action, seq, utf8.RuneCountInString(after), Limit[file]), nil
}

// find returns the one entry containing old.
func find(entries []string, old string) (int, error) {
	at := -1
	for i, e := range entries {
		if strings.Contains(e, strings.TrimSpace(old)) {
			if at >= 0 {
				return 0, refuse("memory: %q is in more than one entry; quote more of the entry", old)
			}
			at = i
		}
	}
	if at < 0 {
		return 0, refuse("memory: no entry contains %q", old)
	}
	return at, nil
}
