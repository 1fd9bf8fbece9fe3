package sanitize

import (
	"strings"
)

// Neutralise rewrites the chat-template markup in text that will be
// replayed to the model (the model's own summary of an epoch, which may
// quote untrusted content), so that no tag or special token it holds is
// read as one: the first character of every "<|…|>" special token and
// of every tag in the markup list is replaced by its full-width form
// ('<' by U+FF1C, '[' by U+FF3B), which no tokenizer of the served
// families reads as markup and which the owner still reads as the text.
//
// It also escapes every line that [Check] refuses as a heading imitating
// the identity block ("# soul.md", "soul.md" underlined, "soul.md (12/4000
// characters)"): a backslash goes before the line that makes it one (the
// ATX line itself, a setext heading's underline), markdown's own escape,
// so the summary cannot pose as an identity file's section.
//
// Invariant: the result holds no match of the special-token pattern and
// none of the markup list's tags, exactly as written or in any letter
// case (the list is lower case; templates' tags are matched as written,
// so every case is covered to be safe), and no heading Check refuses
// whose marking line does not start with a backslash; text without them
// is returned unchanged; Neutralise(Neutralise(s)) == Neutralise(s).
func Neutralise(text string) string {
	for {
		start := firstMarkup(text)
		if start < 0 {
			return escapeHeadings(text)
		}
		full := "\uFF1C"
		if text[start] == '[' {
			full = "\uFF3B"
		}
		text = text[:start] + full + text[start+1:]
	}
}

// firstMarkup is the byte offset of the first markup in text (its '<' or
// '['), or -1.
func firstMarkup(text string) int {
	best := -1
	if loc := specialRE.FindStringIndex(text); loc != nil {
		best = loc[0]
	}
	lower := strings.ToLower(text)
	for _, m := range markup {
		// ToLower keeps byte offsets only for ASCII; search the ASCII
		// folding (the tags are ASCII) so offsets stay text's.
		if i := indexFold(text, lower, m); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// indexFold finds m (ASCII, lower case) in text ignoring ASCII case. lower
// is strings.ToLower(text), used only when it has text's length (then its
// offsets are text's).
func indexFold(text, lower, m string) int {
	if len(lower) == len(text) {
		return strings.Index(lower, m)
	}
	for i := 0; i+len(m) <= len(text); i++ {
		if strings.EqualFold(text[i:i+len(m)], m) {
			return i
		}
	}
	return -1
}

// escapeHeadings puts a backslash before the marking line of every
// heading [Check] refuses, until none is left unescaped (escaping a
// setext underline leaves its text line, which may still be refused as
// a name with the gauge).
func escapeHeadings(text string) string {
	for {
		at := unescapedHeadings(text)
		if len(at) == 0 {
			return text
		}
		for i := len(at) - 1; i >= 0; i-- {
			text = text[:at[i]] + `\` + text[at[i]:]
		}
	}
}

// unescapedHeadings are the byte offsets, ascending, of the first
// non-space character of each refused heading's marking line that is
// not already a backslash.
func unescapedHeadings(text string) []int {
	us := normalise(nil, text)
	var at []int
	for _, h := range headings(us, false) {
		k := h.mark.start
		for k < h.mark.end && space(us[k].r) {
			k++
		}
		if k == h.mark.end || us[k].r == '\\' {
			continue
		}
		if n := len(at); n == 0 || at[n-1] != us[k].off {
			at = append(at, us[k].off)
		}
	}
	return at
}
