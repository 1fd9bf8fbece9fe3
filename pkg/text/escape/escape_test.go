package escape

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// One case per class the package doc escapes, and the classes it keeps.
var classes = []struct {
	name, in, text, line string
}{
	{"plain", "hello, world", "hello, world", "hello, world"},
	{"non-latin", "héllo 世界 Ωμέγα 😀", "héllo 世界 Ωμέγα 😀", "héllo 世界 Ωμέγα 😀"},
	{"newline and tab", "a\nb\tc", "a\nb\tc", `a\nb\tc`},
	{"ESC sequence", "\x1b[2Jx", `\u001b[2Jx`, `\u001b[2Jx`},
	{"OSC 8 hyperlink", "\x1b]8;;http://evil\x1b\\", `\u001b]8;;http://evil\u001b\\`, `\u001b]8;;http://evil\u001b\\`},
	{"CR", "safe\rEVIL", `safe\u000dEVIL`, `safe\u000dEVIL`},
	{"BEL", "\a", `\u0007`, `\u0007`},
	{"backspace", "ab\bc", `ab\u0008c`, `ab\u0008c`},
	{"NUL", "\x00", `\u0000`, `\u0000`},
	{"DEL", "\x7f", `\u007f`, `\u007f`},
	{"C1 NEL", "\u0085", `\u0085`, `\u0085`},
	{"C1 CSI", "\u009b2J", `\u009b2J`, `\u009b2J`},
	{"RLO", "/etc/\u202eoof", `/etc/\u202eoof`, `/etc/\u202eoof`},
	{"bidi embedding", "\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`, `\u202a\u202b\u202c\u202d`},
	{"bidi isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`, `\u2066\u2067\u2068\u2069`},
	{"bidi marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`, `\u200e\u200f\u061c`},
	{"zero width", "a\u200bb\u200cc\u200dd\u2060e", `a\u200bb\u200cc\u200dd\u2060e`, `a\u200bb\u200cc\u200dd\u2060e`},
	{"BOM", "\ufeffx", `\ufeffx`, `\ufeffx`},
	{"soft hyphen", "pass\u00adwd", `pass\u00adwd`, `pass\u00adwd`},
	{"tag characters", "hi\U000e0001\U000e0041\U000e007f", `hi\U000e0001\U000e0041\U000e007f`, `hi\U000e0001\U000e0041\U000e007f`},
	{"line separator", "a\u2028b", `a\u2028b`, `a\u2028b`},
	{"paragraph separator", "a\u2029b", `a\u2029b`, `a\u2029b`},
	{"private use", "\ue000\U000f0000", `\ue000\U000f0000`, `\ue000\U000f0000`},
	{"unassigned", "\u0378\U0001fffd", `\u0378\U0001fffd`, `\u0378\U0001fffd`},
	{"noncharacters", "\ufdd0\ufffe\uffff\U0010ffff", `\ufdd0\ufffe\uffff\U0010ffff`, `\ufdd0\ufffe\uffff\U0010ffff`},
	{"invisible letters", "\u3164\u115f\uffa0", `\u3164\u115f\uffa0`, `\u3164\u115f\uffa0`},
	{"combining grapheme joiner", "a\u034fb", `a\u034fb`, `a\u034fb`},
	{"replacement character is shown", "\ufffd", "\ufffd", "\ufffd"},
	{"no-break space", "a\u00a0b\u3000c", "a\u00a0b\u3000c", `a\u00a0b\u3000c`},
	{"combining mark on a base", "e\u0301", "e\u0301", "e\u0301"},
	{"leading combining mark", "\u0301x", `\u0301x`, `\u0301x`},
	{"combining mark after newline", "a\n\u0301", "a\n\\u0301", `a\n\u0301`},
	{"combining mark after escape", "\u200b\u0301", `\u200b\u0301`, `\u200b\u0301`},
	{"combining mark on backslash", "\\\u0338", "\\\\\u0338", "\\\\\u0338"},
	{"too many marks", "a" + strings.Repeat("\u0301", MaxMarks+2), "a" + strings.Repeat("\u0301", MaxMarks) + `\u0301\u0301`, "a" + strings.Repeat("\u0301", MaxMarks) + `\u0301\u0301`},
	{"emoji presentation", "\u2764\ufe0f 1\ufe0f\u20e3", "\u2764\ufe0f 1\ufe0f\u20e3", "\u2764\ufe0f 1\ufe0f\u20e3"},
	{"variation selector smuggling", "😀\ufe00\ufe01\U000e0100", `😀\ufe00\ufe01\U000e0100`, `😀\ufe00\ufe01\U000e0100`},
	{"second emoji selector", "\u2764\ufe0f\ufe0f", "\u2764\ufe0f\\ufe0f", "\u2764\ufe0f\\ufe0f"},
	{"backslash", `a\b`, `a\\b`, `a\\b`},
	{"typed escape", `\u202e`, `\\u202e`, `\\u202e`},
	{"typed escape vs real", "\\u202e\u202e", `\\u202e\u202e`, `\\u202e\u202e`},
	{"typed newline escape", `\n`, `\\n`, `\\n`},
	{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`, `a\xffb\xc3`},
	{"surrogate bytes", "\xed\xa0\x80", `\xed\xa0\x80`, `\xed\xa0\x80`},
	{"overlong", "\xc0\xaf", `\xc0\xaf`, `\xc0\xaf`},
}

func TestClasses(t *testing.T) {
	for _, tt := range classes {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.text {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.text)
			}
			if got := Line(tt.in); got != tt.line {
				t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
			}
			for _, m := range []mode{modeText, modeLine} {
				out := escape(tt.in, m)
				if err := visible(out, m); err != nil {
					t.Errorf("escape(%q, %d) = %q: %v", tt.in, m, out, err)
				}
				if back, err := unescape(out); err != nil || back != tt.in {
					t.Errorf("unescape(%q) = %q, %v; want %q", out, back, err, tt.in)
				}
			}
		})
	}
}

// TestNoCopy: text that needs no escape comes back as it is.
func TestNoCopy(t *testing.T) {
	s := "nothing to see here: ü, 世界, e\u0301"
	if n := testing.AllocsPerRun(100, func() { _ = Text(s) }); n != 0 {
		t.Errorf("Text of clean text allocates %v times, want 0", n)
	}
}

// TestEveryRune escapes each rune after a base and where it has none
// (after a newline), in both modes, a block of runes at a time.
func TestEveryRune(t *testing.T) {
	const block = 1 << 12
	for lo := rune(0); lo <= unicode.MaxRune; lo += block {
		var onBase, noBase strings.Builder
		for r := lo; r < lo+block; r++ {
			if !utf8.ValidRune(r) {
				continue // surrogates cannot be encoded in UTF-8
			}
			onBase.WriteString("a" + string(r))
			if unicode.Is(unicode.M, r) { // only a mark cares what precedes it
				noBase.WriteString("\n" + string(r))
			}
		}
		for _, s := range []string{onBase.String(), noBase.String()} {
			for _, m := range []mode{modeText, modeLine} {
				out := escape(s, m)
				if err := visible(out, m); err != nil {
					t.Fatalf("escape of block %U, mode %d: %v", lo, m, err)
				}
				if back, err := unescape(out); err != nil || back != s {
					t.Fatalf("escape of block %U, mode %d does not round-trip: %v", lo, m, err)
				}
			}
		}
	}
}

// hostile draws strings from the runes most likely to break the rules.
func hostile(rng *rand.Rand) string {
	pool := []string{"a", "\\", "u", "2", "x", "\n", "\t", "\r", "\x1b", "\x7f", "\u0085",
		"\u202e", "\u2066", "\u200b", "\ufeff", "\U000e0041", "\u0301", "\u20e3", "\ufe0f",
		"\ufe00", "\U000e0100", "\u00a0", "\u3164", "\ue000", "\ufffe", "\xff", "\xc3", "\xe2\x80", "😀"}
	var b strings.Builder
	for range rng.IntN(40) {
		b.WriteString(pool[rng.IntN(len(pool))])
	}
	return b.String()
}

// TestRoundTrip: escaping loses nothing and is unambiguous, because the
// escaped text decodes back to the input for every input.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		checkRoundTrip(t, hostile(rng))
	}
}

// checkRoundTrip: every escaped form of s is visible and decodes back to
// s, and its JSON escape holds.
func checkRoundTrip(t *testing.T, s string) {
	t.Helper()
	for _, m := range []mode{modeText, modeLine} {
		out := escape(s, m)
		if err := visible(out, m); err != nil {
			t.Fatalf("escape(%q, %d) = %q: %v", s, m, out, err)
		}
		if back, err := unescape(out); err != nil || back != s {
			t.Fatalf("unescape(escape(%q, %d)) = %q, %v", s, m, back, err)
		}
	}
	checkJSON(t, s)
}

func TestJSON(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":"b"}`, `{"a":"b"}`},
		{`{"a":"\\u202e \u001b"}`, `{"a":"\\u202e \u001b"}`},
		{"{\"a\":\"\u202e\u00a0\U000e0041\u0301\x7f\"}", `{"a":"\u202e\u00a0\udb40\udc41\u0301\u007f"}`},
		{"\"\xff\"", `"\ufffd"`},
		{`"é 😀"`, `"é 😀"`},
	} {
		if got := JSON(tt.in); got != tt.want {
			t.Errorf("JSON(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, tt := range classes {
		checkJSON(t, tt.in)
	}
}

// checkJSON: JSON of s's encoding decodes to what the encoding decodes to,
// and shows nothing Line would escape.
func checkJSON(t *testing.T, s string) {
	t.Helper()
	enc, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	out := JSON(string(enc))
	var want, got string
	if err := json.Unmarshal(enc, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got != want {
		t.Fatalf("JSON(%s) = %s decodes to %q, %v; want %q", enc, out, got, err, want)
	}
	if err := visible(strings.ReplaceAll(out, `\`, `\\`), modeLine); err != nil {
		t.Fatalf("JSON(%s) = %s: %v", enc, out, err)
	}
}

func FuzzEscape(f *testing.F) {
	for _, tt := range classes {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRoundTrip(t, string(data))
	})
}

func BenchmarkText(b *testing.B) {
	for _, bb := range []struct{ name, in string }{
		{"clean", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 100)},
		{"unicode", strings.Repeat("Ein Café in 東京 😀, e\u0301. ", 100)},
		{"hostile", strings.Repeat("\x1b[2J\u202e\u200b\\u202e\xff\U000e0041\r", 100)},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.in)))
			for b.Loop() {
				_ = Text(bb.in)
			}
		})
	}
}

// unescape reverses Text and Line. It refuses any backslash that does not
// start one of the escapes the package writes, so that an escape could
// never be read two ways.
func unescape(s string) (string, error) {
	var b []byte
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			b = append(b, s[i])
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", errors.New("lone backslash at the end")
		}
		switch s[i+1] {
		case '\\':
			b = append(b, '\\')
			i += 2
		case 'n':
			b = append(b, '\n')
			i += 2
		case 't':
			b = append(b, '\t')
			i += 2
		case 'x', 'u', 'U':
			n := 2
			switch s[i+1] {
			case 'u':
				n = 4
			case 'U':
				n = 8
			}
			if i+2+n > len(s) {
				return "", fmt.Errorf("short escape at %d", i)
			}
			digits := s[i+2 : i+2+n]
			if strings.ToLower(digits) != digits {
				return "", fmt.Errorf("upper-case hex in %q", digits)
			}
			v, err := strconv.ParseUint(digits, 16, 32)
			if err != nil {
				return "", fmt.Errorf("bad escape %q: %v", digits, err)
			}
			if s[i+1] == 'x' {
				if v < 0x80 {
					return "", fmt.Errorf(`\x%s escapes an ASCII byte`, digits)
				}
				b = append(b, byte(v))
			} else {
				if !utf8.ValidRune(rune(v)) || (s[i+1] == 'U') != (v > 0xffff) {
					return "", fmt.Errorf("bad rune escape %q", digits)
				}
				b = utf8.AppendRune(b, rune(v))
			}
			i += 2 + n
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i+1])
		}
	}
	return string(b), nil
}

// visible checks escaped output against the package rules, independently
// of the code that wrote it: valid UTF-8, no invisible, control or
// reordering rune, a combining mark only on a base shown as itself.
func visible(out string, m mode) error {
	if !utf8.ValidString(out) {
		return errors.New("output is not valid UTF-8")
	}
	marks := -1
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		if r == '\\' && i+1 < len(out) {
			// An escape written by the package: a mark may sit on an
			// escaped backslash (the input's base) but on no other.
			marks = -1
			if out[i+1] == '\\' {
				marks = 0
			}
			size := 2 // \\, \n, \t
			switch out[i+1] {
			case 'x':
				size = 4
			case 'u':
				size = 6
			case 'U':
				size = 10
			}
			i += size
			continue
		}
		i += n
		switch {
		case r == '\n' || r == '\t':
			if m != modeText {
				return fmt.Errorf("raw %U in a line", r)
			}
			marks = -1
		case !unicode.IsGraphic(r):
			return fmt.Errorf("raw %U is not graphic", r)
		case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
			return fmt.Errorf("raw %U is default-ignorable", r)
		case m != modeText && unicode.Is(unicode.Zs, r) && r != ' ':
			return fmt.Errorf("raw space %U in a line", r)
		case unicode.Is(unicode.Variation_Selector, r):
			if (r != 0xfe0e && r != 0xfe0f) || marks != 0 {
				return fmt.Errorf("raw variation selector %U", r)
			}
			marks = 1
		case unicode.Is(unicode.M, r):
			if marks < 0 || marks >= MaxMarks {
				return fmt.Errorf("raw combining mark %U without a base", r)
			}
			marks++
		default:
			marks = 0
		}
	}
	return nil
}
