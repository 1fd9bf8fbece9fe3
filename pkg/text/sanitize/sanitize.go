// Package sanitize is the shared check on text that is persisted and later
// shown to the model as trusted: memory writes (every write, and again
// each time the identity block is built), and any other role that keeps
// text for the prompt.
//
// Invariant: text that [Check] accepts is valid UTF-8 and holds no control
// character but newline and tab, and no invisible or format character;
// and in its matching forms (compatibility-normalised, combining marks
// dropped, letters of other scripts that look like Latin ones mapped to
// them per Unicode TR39, case folded; white space removed for markup,
// spaced-out letters joined for phrases) it holds no chat-template markup
// of the model families Boxmaker serves (written out or as HTML character
// references, forms.go), no conversation turn marker ("Human:") at a
// line's start (after any list, heading, table, quote or code prefix, and
// read through character references, which may not spell a character
// refused above either), no markdown heading that names
// an identity file or imitates the identity block's headings, and none of
// the instruction phrases in phrases.go. The phrases are defence in depth
// (docs/sanitize.md, docs/decisions.md 2026-09-24 and 2026-12-01): what
// keeps injected text out of identity is which sessions may write it, not
// this list.
//
// [Neutralise] is the other half, for text that must be kept whatever it
// holds (the model's summary of an epoch): it rewrites the markup instead
// of refusing it, and its result holds no special token and none of the
// markup list's tags.
//
// Check and Neutralise are pure functions; any caller may use them.
package sanitize

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Class names why text was refused. The list is append-only.
type Class string

// The classes.
const (
	Encoding  Class = "encoding"  // not valid UTF-8
	Control   Class = "control"   // a control character other than newline and tab
	Invisible Class = "invisible" // a format, invisible or private-use character
	Markup    Class = "markup"    // chat-template markup
	Phrase    Class = "phrase"    // an instruction phrase
	Heading   Class = "heading"   // a markdown heading naming an identity file
	Marker    Class = "marker"    // a conversation's turn marker ("Human:") at a line's start
)

// Refusal says why Check refused text: the class, the byte offset of the
// first offence, and what was found (escaped, safe to print).
type Refusal struct {
	Class  Class
	Offset int
	Found  string
}

func (r *Refusal) Error() string {
	switch r.Class {
	case Encoding:
		return fmt.Sprintf("invalid UTF-8 at byte %d", r.Offset)
	case Control:
		return fmt.Sprintf("control character %s at byte %d", r.Found, r.Offset)
	case Invisible:
		return fmt.Sprintf("invisible character %s at byte %d", r.Found, r.Offset)
	case Markup:
		return fmt.Sprintf("chat-template markup %q at byte %d", r.Found, r.Offset)
	case Heading:
		return fmt.Sprintf("a markdown heading that imitates the identity block (%s) at byte %d", r.Found, r.Offset)
	case Marker:
		return fmt.Sprintf("a conversation turn marker (%s, then a colon) starting the line at byte %d", r.Found, r.Offset)
	default:
		return fmt.Sprintf("instruction phrase %q at byte %d", r.Found, r.Offset)
	}
}

// Check refuses text that may not be persisted for the prompt. The error
// is a *[Refusal].
func Check(text string) error {
	prev := rune(-1)
	for i, r := range text {
		base := prev
		prev = r
		if (r == 0xfe0e || r == 0xfe0f) && base >= 0 && !unicode.IsSpace(base) && !unicode.Is(unicode.Variation_Selector, base) {
			continue // text or emoji presentation of the rune before it
		}
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(text[i:]); n <= 1 {
				return &Refusal{Class: Encoding, Offset: i}
			}
		}
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return &Refusal{Class: Control, Offset: i, Found: fmt.Sprintf("U+%04X", r)}
		case invisible(r):
			return &Refusal{Class: Invisible, Offset: i, Found: fmt.Sprintf("U+%04X", r)}
		}
	}
	us := normalise(make([]unit, 0, len(text)), text)
	dec, bad := entities(us, text)
	if bad != nil {
		return bad
	}
	m := markupForm(dec, len(text))
	if at, what, ok := findMarkup(m); ok {
		return &Refusal{Class: Markup, Offset: m.off[at.start], Found: shown(what)}
	}
	if i, what, ok := findHeading(us); ok {
		off := len(text)
		if i < len(us) {
			off = us[i].off
		}
		return &Refusal{Class: Heading, Offset: off, Found: what}
	}
	if i, what, ok := findMarker(dec); ok {
		return &Refusal{Class: Marker, Offset: dec[i].off, Found: what}
	}
	p, runs := phraseForm(us, len(text))
	if at, what, ok := findPhrase(p, runs); ok {
		return &Refusal{Class: Phrase, Offset: p.off[at.start], Found: shown(clip(what))}
	}
	return nil
}

// shown neutralises what a refusal found, so the reason (which goes back
// into a tool result) never carries the markup it refused: angle brackets
// are shown as ‹ and ›, square ones as ⟦ and ⟧, and the reason holds no
// markup Check would refuse.
var shown = strings.NewReplacer("<", "‹", ">", "›", "[", "⟦", "]", "⟧").Replace

// invisible reports a rune that renders as nothing or is not a character
// of any script: format characters (zero-width, bidirectional controls,
// tag characters), line and paragraph separators, variation selectors
// (but U+FE0E and U+FE0F directly after their base, which [Check] lets
// through),
// the other default-ignorable code points, private-use, surrogate and
// unassigned runes.
func invisible(r rune) bool {
	switch {
	case r < 0x80:
		return false // the caller refused ASCII controls already
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Co, r), unicode.Is(unicode.Cs, r):
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case unicode.Is(unicode.Variation_Selector, r):
		return true
	case r == 0x034f || r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0 || (r >= 0x17b4 && r <= 0x17b5) || (r >= 0x180b && r <= 0x180f):
		return true
	case r >= 0xfff0 && r <= 0xfffb, r&0xfffe == 0xfffe:
		return true
	}
	return !unicode.Is(unicode.L, r) && !unicode.Is(unicode.M, r) && !unicode.Is(unicode.N, r) &&
		!unicode.Is(unicode.P, r) && !unicode.Is(unicode.S, r) && !unicode.Is(unicode.Zs, r) && r != '\n' && r != '\t'
}

// clip shortens what a refusal shows to 60 bytes, on a rune boundary.
func clip(s string) string {
	if len(s) <= 60 {
		return s
	}
	n := 60
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
