// Package sanitize is the shared check on text that is persisted and later
// shown to the model as trusted: memory writes (every write, and again
// each time the identity block is built), and any other role that keeps
// text for the prompt.
//
// Invariant: text that [Check] accepts is valid UTF-8 and holds no control
// character but newline and tab, no invisible or format character, no
// chat-template markup of the model families Boxmaker serves (after
// folding case and full-width look-alikes), and none of a short fixed list
// of instruction phrases. The list is defence in depth, kept short and
// fixed on purpose (docs/decisions.md, 2026-09-24): what keeps injected
// text out of identity is which sessions may write it, not this list.
//
// Check is a pure function; any caller may use it.
package sanitize

import (
	"fmt"
	"regexp"
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
	default:
		return fmt.Sprintf("instruction phrase %q at byte %d", r.Found, r.Offset)
	}
}

// markup is the chat-template markup of the model families in use (Qwen
// and its ChatML, Llama, Gemma, Mistral), lower case. Any "<|...|>"
// special token is refused by [specialRE] as well.
var markup = []string{
	"<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
	"<tools>", "</tools>", "<function=", "</function>", "<parameter=", "</parameter>",
	"<start_of_turn>", "<end_of_turn>", "[inst]", "[/inst]", "<<sys>>", "<</sys>>",
	"<s>", "</s>", "[tool_calls]", "[available_tools]",
}

// specialRE matches a special token such as <|im_start|> or <|eot_id|>.
var specialRE = regexp.MustCompile(`<\|[^\n<>|]{0,40}\|>`)

// phrases are the six instruction phrases, matched on lower-cased text
// with runs of white space folded to one space.
var phrases = []*regexp.Regexp{
	regexp.MustCompile(`ignore (all |any )?(of )?(the |your )?(previous|prior|above|earlier|preceding) (instructions|prompts|rules)`),
	regexp.MustCompile(`disregard (all |any )?(of )?(the |your )?(previous|prior|above|earlier|preceding) (instructions|prompts|rules)`),
	regexp.MustCompile(`forget (all |everything )?(of )?(your|the|previous) (instructions|rules)`),
	regexp.MustCompile(`you are now (a|an|the|in|my) `),
	regexp.MustCompile(`new (system )?instructions ?:`),
	regexp.MustCompile(`(reveal|print|repeat|show) (me )?(your|the) system prompt`),
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
	folded, offsets := fold(text)
	if loc := specialRE.FindStringIndex(folded); loc != nil {
		return &Refusal{Class: Markup, Offset: offsets[loc[0]], Found: shown(folded[loc[0]:loc[1]])}
	}
	for _, m := range markup {
		if i := strings.Index(folded, m); i >= 0 {
			return &Refusal{Class: Markup, Offset: offsets[i], Found: shown(m)}
		}
	}
	for _, re := range phrases {
		if loc := re.FindStringIndex(folded); loc != nil {
			return &Refusal{Class: Phrase, Offset: offsets[loc[0]], Found: shown(folded[loc[0]:loc[1]])}
		}
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

// fold lower-cases text, maps full-width ASCII look-alikes (U+FF01 to
// U+FF5E) to ASCII and folds runs of white space to one space, so that
// "<｜IM_START｜>" and "ignore   previous\ninstructions" are found. It
// returns, for each byte of the result, the offset in text it came from.
func fold(text string) (string, []int) {
	var b strings.Builder
	offsets := make([]int, 0, len(text)+1)
	space := false
	for i, r := range text {
		if r >= 0xff01 && r <= 0xff5e {
			r -= 0xff01 - 0x21
		}
		if unicode.IsSpace(r) {
			if space {
				continue
			}
			space, r = true, ' '
		} else {
			space = false
		}
		r = unicode.ToLower(r)
		n := b.Len()
		b.WriteRune(r)
		for range b.Len() - n {
			offsets = append(offsets, i)
		}
	}
	offsets = append(offsets, len(text))
	return b.String(), offsets
}
