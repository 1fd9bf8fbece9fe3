package sanitize

import (
	"html"
	"slices"
	"unicode/utf8"
)

// Two more ways text poses as structure, beside the markup list: markup
// written as HTML character references, and a conversation's turn
// markers.

// entities returns us with every HTML character reference ("&lt;",
// "&#60;", "&#x3c;", "&vert;", and the legacy ones without a semicolon,
// as a browser reads them) replaced by the matching form of the
// character it names, at the offset of its '&'; references that name a
// reference ("&amp;lt;") are read again, up to maxRounds times. A model
// that reads HTML (and every served family does) reads
// "&lt;|im_start|&gt;" as the token it spells, and a renderer shows it
// as one, so the markup rule looks through the encoding.
func entities(us []unit) []unit {
	if !slices.ContainsFunc(us, func(u unit) bool { return u.r == '&' }) {
		return us // the common case: nothing to read, nothing copied
	}
	for range maxRounds {
		out, changed := entityRound(us)
		if !changed {
			return us
		}
		us = out
	}
	return us
}

// maxRounds bounds how often nested references are read: "&amp;amp;lt;"
// and deeper is text about HTML, not markup.
const maxRounds = 3

// maxRef is the longest reference read: the longest entity name in
// HTML's table ("&CounterClockwiseContourIntegral;") has 33 bytes.
const maxRef = 40

func entityRound(us []unit) ([]unit, bool) {
	var out []unit
	changed := false
	for i := 0; i < len(us); i++ {
		if us[i].r != '&' {
			out = append(out, us[i])
			continue
		}
		j := i + 1
		for j < len(us) && j-i < maxRef && (alnum(us[j].r) || us[j].r == '#') && us[j].r < utf8.RuneSelf {
			j++
		}
		end := j
		if j < len(us) && us[j].r == ';' {
			end = j + 1
		}
		if j == i+1 {
			out = append(out, us[i])
			continue
		}
		ref := runes(us[i:end])
		dec := html.UnescapeString(ref)
		if dec == ref {
			out = append(out, us[i])
			continue
		}
		// The reference decodes to a character and, for a legacy name
		// read without its semicolon, the letters after it; fold the
		// result as the text is folded, at the '&''s offset.
		n := len(out)
		out = append(out, normalise(nil, dec)...)
		for k := n; k < len(out); k++ {
			out[k].off = us[i].off
		}
		changed = true
		i = end - 1
	}
	return out, changed
}

// markers are the turn markers of chat transcripts (Anthropic's
// "Human:" and "Assistant:", and "AI:") as folded letters: at a line's
// start they make the text that follows read as another turn of the
// conversation. "User:" and "System:" are left to the markup and phrase
// rules: notes say "System: Debian 12" and "User: alice".
var markers = []string{"human", "assistant", "ai"}

// findMarker reports the first line of us that starts (after white
// space, block-quote marks and emphasis) with a turn marker and a colon,
// as the unit index of the marker and the marker.
func findMarker(us []unit) (int, string, bool) {
	for _, l := range splitLines(us) {
		i := l.start
		for i < l.end && (space(us[i].r) || us[i].r == '>' || us[i].r == '*' || us[i].r == '_') {
			i++
		}
		for _, m := range markers {
			k, ok := i, true
			for _, r := range m {
				if k >= l.end || us[k].r != r {
					ok = false
					break
				}
				k++
			}
			if !ok {
				continue
			}
			for k < l.end && (space(us[k].r) || us[k].r == '*' || us[k].r == '_') {
				k++
			}
			if k < l.end && us[k].r == ':' {
				return i, m, true
			}
		}
	}
	return 0, "", false
}
