// Package escape makes untrusted text (what the model wrote, and anything
// a daemon relays) safe to show the owner on a terminal.
//
// Invariant: the output of [Text], [Line] and [JSON] is valid UTF-8 in
// which no rune can hide, fake or reorder part of the screen. The output
// of Text and Line also determines the input exactly: the owner sees
// every rune the model wrote, either as itself or as an escape, and no
// two inputs look the same. Any caller may use it; every string from the
// model or from another role passes through it before it reaches a
// terminal.
//
// # Rules
//
// A rune is shown as itself only when it is graphic (a letter, mark,
// number, punctuation, symbol or space separator; [unicode.IsGraphic]) and
// visible. Everything else is written as \uXXXX, or \UXXXXXXXX beyond the
// Basic Multilingual Plane, in lower-case hex:
//
//   - C0 controls (ESC, CR, BEL, backspace, ...), DEL and C1 controls
//     (U+0080 to U+009F), which a terminal may obey;
//   - format characters (category Cf): bidirectional embeddings,
//     overrides, isolates and marks, zero-width characters, U+FEFF, the
//     soft hyphen and the tag characters used for "ASCII smuggling";
//   - the line and paragraph separators U+2028 and U+2029;
//   - private-use, surrogate, unassigned runes and noncharacters, whose
//     look the terminal's font decides (unassigned means unassigned in
//     the Unicode version of the Go release that built this program: a
//     newer character is escaped, the safe direction);
//   - the other default-ignorable code points, which render as nothing
//     (Hangul fillers such as U+3164, the combining grapheme joiner, and
//     so on);
//   - variation selectors, except U+FE0E and U+FE0F directly after their
//     base (text and emoji presentation). The others change nothing a
//     reader would notice and can carry a hidden payload, one byte per
//     selector;
//   - a combining mark with no base to sit on: at the start of the text,
//     after a newline, tab or escape (where it would draw over the
//     prompt, the previous line or the escape itself), and after more
//     than [MaxMarks] marks on one base, which no orthography needs and
//     which can draw over neighbouring lines.
//
// A backslash is written \\, so that the six characters \u202e typed by
// the model cannot be mistaken for an escaped U+202E. A byte that is not
// part of valid UTF-8 is written \xNN.
//
// [Text] is for chat text and keeps newline and tab. [Line] is for one
// line (tool names, arguments, approvals, error messages): it writes
// newline and tab as \n and \t, and also escapes every space separator
// other than U+0020 (a no-break space looks like a space, but is a
// different path). [JSON] applies the rules of Line to a JSON text using
// JSON's own \u escapes, so the result is still JSON of the same value.
package escape

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxMarks is how many combining marks in a row one base may carry before
// the rest are escaped.
const MaxMarks = 8

type mode int

const (
	modeText mode = iota
	modeLine
	modeJSON
)

// Text returns s escaped for display as chat text: newlines and tabs stay
// as they are; everything else follows the package rules.
func Text(s string) string { return escape(s, modeText) }

// Line returns s escaped for display on one line: newline and tab become
// \n and \t, and space separators other than U+0020 are escaped too.
func Line(s string) string { return escape(s, modeLine) }

// JSON returns js, a compact JSON text (as strict.Marshal or encoding/json
// writes it), with every rune that [Line] would escape written as a JSON
// \u escape (a surrogate pair beyond the Basic Multilingual Plane). The
// result decodes to the same value, and equals js when js needs no
// escape. Backslashes are JSON's own and stay as they are. Since JSON is
// valid UTF-8, a byte that is not is written \ufffd, as encoding/json
// does; whitespace between tokens is not expected and would be escaped.
func JSON(js string) string { return escape(js, modeJSON) }

// escape copies s until the first rune that needs an escape, so that the
// common case (nothing to escape) returns s without allocating.
func escape(s string, m mode) string {
	var b []byte // nil until the first escape
	marks := -1  // marks shown on the current base; -1: no base
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		keep, next := classify(r, n, marks, m)
		switch {
		case keep && b != nil:
			b = append(b, s[i:i+n]...)
		case !keep:
			if b == nil {
				b = make([]byte, 0, len(s)+16)
				b = append(b, s[:i]...)
			}
			b = appendEscape(b, s[i], r, n, m)
		}
		marks = next
		i += n
	}
	if b == nil {
		return s
	}
	return string(b)
}

// classify decides whether rune r (n bytes; an invalid byte is
// utf8.RuneError with n == 1) is shown as itself, given how many marks the
// current base carries, and returns the mark count after it.
func classify(r rune, n, marks int, m mode) (keep bool, next int) {
	switch {
	case r == utf8.RuneError && n == 1:
		return false, -1
	case r == '\\':
		return m == modeJSON, 0
	case r == '\n' || r == '\t':
		return m == modeText, -1
	case r >= 0x20 && r < 0x7f:
		return true, 0
	case !unicode.IsGraphic(r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
		return false, -1
	case unicode.Is(unicode.Zs, r):
		if m == modeText {
			return true, 0
		}
		return false, -1
	case unicode.Is(unicode.Variation_Selector, r):
		if (r == 0xfe0e || r == 0xfe0f) && marks == 0 {
			return true, 1
		}
		return false, -1
	case unicode.Is(unicode.M, r):
		if marks >= 0 && marks < MaxMarks {
			return true, marks + 1
		}
		return false, -1
	}
	return true, 0
}

const hex = "0123456789abcdef"

// appendEscape writes the escape for rune r (n bytes, the first of which
// is c).
func appendEscape(b []byte, c byte, r rune, n int, m mode) []byte {
	if m == modeJSON {
		switch {
		case r == '\n':
			return append(b, `\n`...)
		case r == '\t':
			return append(b, `\t`...)
		case r == utf8.RuneError && n == 1:
			return appendU(b, utf8.RuneError)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			return appendU(appendU(b, r1), r2)
		}
		return appendU(b, r)
	}
	switch {
	case r == utf8.RuneError && n == 1:
		return append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
	case r == '\\':
		return append(b, `\\`...)
	case r == '\n':
		return append(b, `\n`...)
	case r == '\t':
		return append(b, `\t`...)
	case r > 0xffff:
		b = append(b, '\\', 'U')
		for shift := 28; shift >= 0; shift -= 4 {
			b = append(b, hex[(r>>shift)&0xf])
		}
		return b
	}
	return appendU(b, r)
}

// appendU writes \uXXXX for a rune of the Basic Multilingual Plane.
func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hex[(r>>12)&0xf], hex[(r>>8)&0xf], hex[(r>>4)&0xf], hex[r&0xf])
}
