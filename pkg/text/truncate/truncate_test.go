package truncate

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBytes(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
		cut  bool
	}{
		{"hello", 10, "hello", false},
		{"hello", 5, "hello", false},
		{"hello", 3, "hel", true},
		{"héllo", 2, "h", true}, // é is 2 bytes: not split
		{"héllo", 3, "hé", true},
		{"日本", 4, "日", true},
		{"日本", 2, "", true},
		{"x", 0, "", true},
		{"x", -1, "", true},
		{"", 0, "", false},
	}
	for _, tt := range tests {
		got, cut := Bytes(tt.s, tt.n)
		if got != tt.want || cut != tt.cut {
			t.Errorf("Bytes(%q, %d) = %q, %v; want %q, %v", tt.s, tt.n, got, cut, tt.want, tt.cut)
		}
	}
}

func TestEllipsis(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdefgh", 6, "abc…"},
		{"ab日本", 7, "ab…"}, // 日 would end at 5 bytes, leaving 2 for the 3-byte mark
		{"abcdef", 2, "…"},
	}
	for _, tt := range tests {
		if got := Ellipsis(tt.s, tt.n); got != tt.want {
			t.Errorf("Ellipsis(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// FuzzBytes: the cut is a prefix, within the budget, and valid UTF-8
// whenever the input is; Ellipsis stays within its budget.
func FuzzBytes(f *testing.F) {
	f.Add("héllo wörld 日本語", 7)
	f.Add(strings.Repeat("€", 50), 100)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= len(s) + 8
		got, cut := Bytes(s, n)
		if !strings.HasPrefix(s, got) || (cut && len(got) > max(n, 0)) || cut != (len(s) > n) {
			t.Fatalf("Bytes(%q, %d) = %q, %v", s, n, got, cut)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Bytes(%q, %d) = %q: split a rune", s, n, got)
		}
		if e := Ellipsis(s, n); n >= len(Mark) && len(e) > n {
			t.Fatalf("Ellipsis(%q, %d) = %q: over the budget", s, n, e)
		}
	})
}
