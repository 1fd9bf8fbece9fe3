package config

import (
	"testing"
	"unicode"
)

// TestQuoteRoundTrips: whatever Quote writes, Decode reads back as the
// same string, control characters, quotes and backslashes included.
func TestQuoteRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", `a "quoted" \ path`, "tab\there\nnewline", "\x7f\x00\x1b[2J", "ünïcode ✓", "bidi\u202e\u2028\U000E0041 tag"} {
		var v struct{ K string }
		if err := Decode([]byte("K = "+Quote(s)+"\n"), "t.toml", &v); err != nil {
			t.Fatalf("Quote(%q) = %s does not decode: %v", s, Quote(s), err)
		}
		if v.K != s {
			t.Errorf("Quote(%q) read back as %q", s, v.K)
		}
		for _, r := range Quote(s) {
			if !unicode.IsGraphic(r) {
				t.Errorf("Quote(%q) = %q holds %U", s, Quote(s), r)
			}
		}
	}
}
