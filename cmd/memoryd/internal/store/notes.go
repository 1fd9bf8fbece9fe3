package store

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// notes.md is append-only. Each note is a header line, its text, and a
// blank line:
//
//	<!-- note {"id":"n1","at":"...","session":"s1","kind":"note",...} -->
//	The owner prefers tea.
//
// The header is decoded strictly; a text line may never start with the
// header's marker, so the file parses one way only.

// The kinds of note.
const (
	KindNote    = "note"    // recorded with the memory tool's note (or an identity add turned into a note)
	KindMoved   = "moved"   // moved out of an identity file by consolidate
	KindDropped = "dropped" // dropped from an identity file (remove, replace, consolidate)
	KindStaged  = "staged"  // an identity add staged for the owner's review
	KindReview  = "review"  // the owner's decision on a staged or untrusted note (Ref)
)

// The recall source tags.
const (
	SourceIdentity = "identity"       // left an identity file
	SourceMemory   = "memory"         // trusted experience
	SourceTainted  = "memory-tainted" // experience from a session that read untrusted content
)

const noteMarker = "<!-- note "

// Note is one entry of notes.md.
type Note struct {
	ID        string          `json:"id"`
	At        string          `json:"at"`
	Session   string          `json:"session"`
	Kind      string          `json:"kind"`
	Untrusted bool            `json:"untrusted"`
	Class     dataclass.Class `json:"class"`
	File      string          `json:"file"` // the identity file it left or would go to
	Ref       string          `json:"ref"`  // a review's note
	Text      string          `json:"-"`
}

// Source is the note's recall source tag.
func (n Note) Source() string {
	switch {
	case n.Kind == KindMoved || n.Kind == KindDropped:
		return SourceIdentity
	case n.Untrusted:
		return SourceTainted
	default:
		return SourceMemory
	}
}

func (n Note) encode() (string, error) {
	h, err := strict.Marshal(n)
	if err != nil {
		return "", err
	}
	return noteMarker + string(h) + " -->\n" + n.Text + "\n\n", nil
}

// ReadNotes parses notes.md strictly; a missing file has no notes.
func ReadNotes(path string) ([]Note, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read notes: %w", err)
	}
	defer f.Close()
	var out []Note
	var text []string
	flush := func() {
		if len(out) > 0 {
			out[len(out)-1].Text = strings.TrimSpace(strings.Join(text, "\n"))
		}
		text = nil
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		h, ok := strings.CutPrefix(line, noteMarker)
		if !ok {
			if len(out) == 0 && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%s:%d: text before the first note header; see docs/runbook.md#memory-file-refused", path, n)
			}
			text = append(text, line)
			continue
		}
		h, ok = strings.CutSuffix(h, " -->")
		var note Note
		if !ok {
			return nil, fmt.Errorf("%s:%d: unterminated note header; see docs/runbook.md#memory-file-refused", path, n)
		}
		if err := strict.Unmarshal([]byte(h), &note); err != nil {
			return nil, fmt.Errorf("%s:%d: %v; see docs/runbook.md#memory-file-refused", path, n, err)
		}
		flush()
		out = append(out, note)
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read notes: %w", err)
	}
	return out, nil
}

// appendNote gives n the next id and the time, appends it durably, and
// journals it. The caller holds s.mu.
func (s *Store) appendNote(n Note) (Note, error) {
	n.Text = noteText(n.Text)
	n.ID = s.nextID()
	n.At = s.now().UTC().Format("2006-01-02T15:04:05Z")
	enc, err := n.encode()
	if err != nil {
		return Note{}, err
	}
	f, err := os.OpenFile(s.path(Notes), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return Note{}, fmt.Errorf("append note: %w", err)
	}
	_, werr := f.WriteString(enc)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return Note{}, fmt.Errorf("append note: %w", err)
	}
	s.notes = append(s.notes, n)
	s.noteID(n.ID)
	if _, err := s.journal.Append(wire.MemoryEdit{Seq: int64(s.journal.Lines() + 1), At: n.At, Session: n.Session, File: Notes, Action: n.Kind, Note: n.ID}); err != nil {
		return Note{}, err
	}
	return n, nil
}

// nextID is one past the highest note id in notes.md, so an id is never
// reused, even after notes were deleted by hand. The caller holds s.mu.
func (s *Store) nextID() string { return fmt.Sprintf("n%d", s.top+1) }

// noteID raises the highest id seen to id's number. The caller holds s.mu
// (or is Open).
func (s *Store) noteID(id string) {
	if v, err := strconv.Atoi(strings.TrimPrefix(id, "n")); err == nil && strings.HasPrefix(id, "n") && v > s.top {
		s.top = v
	}
}

// noteText makes any text safe to append to notes.md, whatever its
// origin (an identity entry edited by hand leaves unchecked): a line
// starting with <!-- has its < shown as ‹, so it can never read as a note
// header. Text the tool took was refused such lines already.
func noteText(text string) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "<!--") {
			lines[i] = strings.Replace(line, "<", "‹", 1)
		}
	}
	return strings.Join(lines, "\n")
}

// checkText is the write check plus the rules that keep the files
// parseable: no note marker at a line's start, no entry separator.
func checkText(text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("the text is empty")
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "<!--") {
			return errors.New("a line may not start with <!--")
		}
		if strings.TrimSpace(line) == "§" {
			return errors.New("a line holding only § separates entries and may not be written")
		}
	}
	return nil
}
