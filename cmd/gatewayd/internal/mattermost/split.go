package mattermost

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxRunes is the server's message limit, in runes
// (model.PostMessageMaxRunesV2; Post.IsValid counts runes).
const MaxRunes = 16383

// Split breaks text into pieces of at most max runes each, on rune
// boundaries, preferring a line break, then a space, in the last quarter
// of each piece. Nothing is dropped: the pieces concatenate to text.
func Split(text string, max int) []string {
	if max < 1 {
		max = MaxRunes
	}
	var out []string
	for utf8.RuneCountInString(text) > max {
		cut := Cut(text, max)
		out = append(out, text[:cut])
		text = text[cut:]
	}
	return append(out, text)
}

// Cut is the byte length of the first piece [Split] makes of text: all
// of it when it fits in max runes, else at most max runes ending on a
// line break or a space in the piece's last quarter if there is one.
func Cut(text string, max int) int {
	if max < 1 {
		max = MaxRunes
	}
	if utf8.RuneCountInString(text) <= max {
		return len(text)
	}
	cut := byteOffset(text, max)
	head := text[:cut]
	if i := strings.LastIndexByte(head, '\n'); i >= cut*3/4 && i > 0 {
		cut = i + 1
	} else if i := strings.LastIndexByte(head, ' '); i >= cut*3/4 && i > 0 {
		cut = i + 1
	}
	return cut
}

// byteOffset is the byte offset of rune n of s.
func byteOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// sorted orders posts oldest first, by create_at then id.
func sorted(ps []*Post) []*Post {
	slices.SortFunc(ps, func(a, b *Post) int {
		if c := cmp.Compare(a.CreateAt, b.CreateAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return ps
}
