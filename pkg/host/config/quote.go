package config

import (
	"fmt"
	"strings"
)

// Quote is s as a TOML basic string: quotes and backslashes escaped,
// control characters as \uXXXX, so text written into a TOML file (a
// grant proposal, a suggestion) reads back as exactly s.
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
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
