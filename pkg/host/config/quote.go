package config

import (
	"fmt"
	"strings"
	"unicode"
)

// Quote is s as a TOML basic string: quotes and backslashes escaped,
// control characters and every other character that is not graphic (a
// bidi override, a line separator) as \uXXXX or \UXXXXXXXX, so text
// written into a TOML file (a grant proposal, a suggestion) reads back as
// exactly s, and the file shows on a terminal as what it holds.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, c)
		case !unicode.IsGraphic(c) && c <= 0xffff:
			fmt.Fprintf(&b, `\u%04X`, c)
		case !unicode.IsGraphic(c):
			fmt.Fprintf(&b, `\U%08X`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
