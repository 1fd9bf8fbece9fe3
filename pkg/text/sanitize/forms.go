package sanitize

import (
	"fmt"
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
// as one, so the markup rule looks through the encoding. A reference to
// a character Check refuses written out ("&#8203;", "&shy;", "&#1;") is
// refused the same way: the second result says so.
//
// Names are read as text wrote them ("&ZeroWidthSpace;" is U+200B, and
// names are case-sensitive), from text, the original of us; a name the
// folded form alone spells (as in a reference read in an earlier round)
// is read as folded.
func entities(us []unit, text string) ([]unit, *Refusal) {
	if !slices.ContainsFunc(us, func(u unit) bool { return u.r == '&' }) {
		return us, nil // the common case: nothing to read, nothing copied
	}
	for range maxRounds {
		out, bad, changed := entityRound(us, text)
		if bad != nil {
			return us, bad
		}
		if !changed {
			return us, nil
		}
		us = out
	}
	return us, nil
}

// maxRounds bounds how often nested references are read: "&amp;amp;lt;"
// and deeper is text about HTML, not markup.
const maxRounds = 3

// maxRef is the longest reference read: the longest entity name in
// HTML's table ("&CounterClockwiseContourIntegral;") has 33 bytes.
const maxRef = 40

func entityRound(us []unit, text string) ([]unit, *Refusal, bool) {
	var out []unit
	changed := false
	for i := 0; i < len(us); i++ {
		if us[i].r != '&' {
			out = append(out, us[i])
			continue
		}
		// A numeric reference's leading zeros count nothing ("&#00072;"
		// is 'H', as a browser reads it), so they are passed over
		// before the length cap, and left out of what is decoded.
		digits, skip := i+1, 0
		if digits < len(us) && us[digits].r == '#' {
			digits++
			if digits < len(us) && us[digits].r == 'x' {
				digits++
			}
			z := digits
			for z < len(us) && us[z].r == '0' {
				z++
			}
			skip = max(z-digits-1, 0) // one zero kept: "&#0;" is a reference
		}
		j := i + 1
		for j < len(us) && j-i-skip < maxRef && (alnum(us[j].r) || us[j].r == '#') && us[j].r < utf8.RuneSelf {
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
		if skip > 0 {
			ref = runes(us[i:digits]) + runes(us[digits+skip:end])
		}
		dec := html.UnescapeString(ref)
		if orig, ok := original(us[i:end], text); ok && digits == i+1 {
			if d := html.UnescapeString(orig); d != orig {
				ref, dec = orig, d
			}
		}
		if dec == ref {
			out = append(out, us[i])
			continue
		}
		if bad := refused(dec, us[i].off); bad != nil {
			return nil, bad, false
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
	return out, nil, changed
}

// original is the text us came from when each unit is one ASCII byte
// of it, in order.
func original(us []unit, text string) (string, bool) {
	start := us[0].off
	for k, u := range us {
		if o := start + k; u.off != o || o >= len(text) || text[o] >= utf8.RuneSelf {
			return "", false
		}
	}
	return text[start : start+len(us)], true
}

// refused is Check's refusal of a control or invisible character in
// dec, a decoded reference at offset off, or nil.
func refused(dec string, off int) *Refusal {
	for _, r := range dec {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return &Refusal{Class: Control, Offset: off, Found: fmt.Sprintf("U+%04X (as a character reference)", r)}
		case invisible(r):
			return &Refusal{Class: Invisible, Offset: off, Found: fmt.Sprintf("U+%04X (as a character reference)", r)}
		}
	}
	return nil
}

// markers are the turn markers of chat transcripts (Anthropic's
// "Human:" and "Assistant:", and "AI:") as folded letters: at a line's
// start they make the text that follows read as another turn of the
// conversation. "User:" and "System:" are left to the markup and phrase
// rules: notes say "System: Debian 12" and "User: alice".
var markers = []string{"human", "assistant", "ai"}

// findMarker reports the first line of us (the decoded form: character
// references read) that starts with a turn marker and a colon, as the
// unit index of the marker and the marker. What may come before the
// marker on the line is passed over: white space and every other rune
// that is not a letter or digit (block quotes, list bullets, headings,
// table bars, quotes, code ticks, emphasis), and a numbered list's
// number ("1." or "1)"). Between the marker and the colon, the same but
// digits and letters.
func findMarker(us []unit) (int, string, bool) {
	for _, l := range splitLines(us) {
		i := l.start
		for i < l.end {
			if !alnum(us[i].r) {
				i++
				continue
			}
			k := i
			for k < l.end && '0' <= us[k].r && us[k].r <= '9' {
				k++
			}
			if k > i && k < l.end && (us[k].r == '.' || us[k].r == ')') {
				i = k + 1 // a numbered list's number
				continue
			}
			break
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
			for k < l.end && !alnum(us[k].r) && us[k].r != ':' {
				k++
			}
			if k < l.end && us[k].r == ':' {
				return i, m, true
			}
		}
	}
	return 0, "", false
}
