// Package truncate cuts text to a byte budget without splitting a UTF-8
// sequence: the one rune-safe cut for tool results, snippets, refusal
// details and quoted peer text.
//
// Invariant: every result is a prefix of its input ending on a rune
// boundary (followed, for [Ellipsis], by "…"), and never longer than the
// budget, so a cut of valid UTF-8 is valid UTF-8 and a cap stated in bytes
// holds. A byte that is not the start of a rune is never the last one kept;
// invalid input is cut at the budget's nearest start byte, as valid input.
package truncate

import "unicode/utf8"

// Mark is what [Ellipsis] appends to a cut text.
const Mark = "…"

// Bytes returns the longest prefix of s of at most n bytes that does not
// end inside a UTF-8 sequence, and whether anything was cut.
func Bytes(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// Ellipsis returns s if it fits in n bytes, and otherwise its longest
// rune-safe prefix that leaves room for [Mark], followed by Mark: at most
// n bytes in all (just Mark if n is smaller than Mark).
func Ellipsis(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut, _ := Bytes(s, n-len(Mark))
	return cut + Mark
}
