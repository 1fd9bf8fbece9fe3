package sanitize

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The look-alike table: every entry maps a rune that NFKD leaves alone
// (compatibility forms are NFKD's, not the table's) to a Latin letter,
// no rune is listed twice, and the well-known pairs of TR39 are there.
func TestLookalikes(t *testing.T) {
	seen := map[rune]byte{}
	for _, l := range lookalikes {
		if l.to < 'a' || l.to > 'z' {
			t.Errorf("lookalikes maps to %q, want a lower-case Latin letter", l.to)
		}
		for _, r := range l.from {
			if r < 0x80 || r == utf8.RuneError {
				t.Errorf("lookalikes lists %U", r)
			}
			if norm.NFKD.String(string(r)) != string(r) {
				t.Errorf("lookalikes lists %U, which NFKD already maps", r)
			}
			if prev, ok := seen[r]; ok {
				t.Errorf("lookalikes lists %U for %c and %c", r, prev, l.to)
			}
			seen[r] = l.to
		}
	}
	for from, to := range map[rune]rune{
		'а': 'a', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x', 'і': 'i', 'ј': 'j', 'ѕ': 's',
		'А': 'a', 'В': 'b', 'Е': 'e', 'К': 'k', 'М': 'm', 'Н': 'h', 'О': 'o', 'Р': 'p', 'С': 'c', 'Т': 't', 'Х': 'x', 'І': 'i',
		'м': 'm', 'т': 't', 'к': 'k', 'н': 'h', 'г': 'r',
		'α': 'a', 'ε': 0, 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't', 'υ': 'u', 'η': 'n',
		'Α': 'a', 'Β': 'b', 'Ε': 'e', 'Η': 'h', 'Ι': 'i', 'Κ': 'k', 'Μ': 'm', 'Ν': 'n', 'Ο': 'o', 'Ρ': 'p', 'Τ': 't', 'Χ': 'x', 'Υ': 'y', 'Ζ': 'z',
		'ɑ': 'a', 'ı': 'i', 'ʏ': 'y', 'ᴀ': 0, 'Ꭺ': 'a', 'ꓮ': 'a',
	} {
		got := rune(seen[from])
		if to == 0 && got != 0 {
			continue // present, and either letter is defensible
		}
		if to != 0 && got != to {
			t.Errorf("lookalikes maps %c (%U) to %q, want %q", from, from, got, to)
		}
	}
}

func TestNormalise(t *testing.T) {
	for in, want := range map[string]string{
		"ＩＧＮＯＲＥ":                    "ignore",
		"𝐢𝐠𝐧𝐨𝐫𝐞":                    "ignore",
		"іgnоrе":                    "ignore",
		"Ïgnörë":                    "ignore",
		"ﬁle":                       "file",
		"＜｜im_start｜＞":              "<|im_start|>",
		"Café":                      "cafe",
		"日本語":                       "日本語",
		"i g n o r e":               "ignore",
		"i g n o r e   a l l":       "ignore all",
		"s.p.a.c.e.d":               "spaced",
		"a b":                       "a b",
		"U.S.A. trip":               "usa. trip",
		"tea\n\n  coffee":           "tea coffee",
		"y o u  a r e  n o w  a  p": "you are now a p",
	} {
		if got := fold(in); got != want {
			t.Errorf("fold(%q) = %q, want %q", in, got, want)
		}
	}
}

// skeleton is the normalised runes of text, without the phrase form's
// joining of spaced letters.
func skeleton(text string) string {
	var b strings.Builder
	for _, u := range normalise(nil, text) {
		b.WriteRune(u.r)
	}
	return b.String()
}

// checkFold is the fold's properties, for the property test and the fuzz
// target: normalising is idempotent, offsets are in range and never go
// back, and the matching forms hold no upper-case letter.
func checkFold(t *testing.T, s string) {
	t.Helper()
	once := skeleton(s)
	if twice := skeleton(once); twice != once {
		t.Fatalf("skeleton(%q) = %q, but skeleton of that is %q", s, once, twice)
	}
	us := normalise(nil, s)
	prev := 0
	for _, u := range us {
		if u.off < prev || u.off > len(s) {
			t.Fatalf("normalise(%q): offset %d after %d", s, u.off, prev)
		}
		prev = u.off
		if unicode.IsUpper(u.r) && unicode.ToLower(u.r) != u.r {
			t.Fatalf("normalise(%q) holds upper-case %U", s, u.r)
		}
	}
	for _, f := range []form{markupForm(us, len(s)), func() form { p, _ := phraseForm(us, len(s)); return p }()} {
		if len(f.off) != len(f.s)+1 {
			t.Fatalf("form of %q: %d offsets for %d bytes", s, len(f.off), len(f.s))
		}
	}
}

func TestFoldProperties(t *testing.T) {
	for _, s := range append(readCorpus(t, "hostile.txt"), readCorpus(t, "clean.txt")...) {
		checkFold(t, s)
	}
}
