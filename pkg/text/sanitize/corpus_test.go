package sanitize

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// readCorpus reads a testdata file: one text a line, "//" lines are
// comments, and escapes follow strconv.Unquote.
func readCorpus(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		s, err := strconv.Unquote(`"` + strings.ReplaceAll(line, `"`, `\"`) + `"`)
		if err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The corpus figures docs/sanitize.md reports: every hostile text is
// refused, every clean one accepted, and every overblocked one (benign,
// refused on purpose) refused.
const (
	hostileTexts     = 175
	cleanTexts       = 128
	overblockedTexts = 5
)

func TestCorpus(t *testing.T) {
	hostile, clean, over := readCorpus(t, "hostile.txt"), readCorpus(t, "clean.txt"), readCorpus(t, "overblocked.txt")
	if len(hostile) != hostileTexts || len(clean) != cleanTexts || len(over) != overblockedTexts {
		t.Errorf("corpus has %d hostile, %d clean and %d overblocked texts, docs/sanitize.md says %d, %d and %d",
			len(hostile), len(clean), len(over), hostileTexts, cleanTexts, overblockedTexts)
	}
	for _, s := range over {
		if Check(s) == nil {
			t.Errorf("Check(%q) = nil; it is in overblocked.txt, so move it to clean.txt and update docs/sanitize.md", s)
		}
	}
	classes := map[Class]int{}
	for _, s := range hostile {
		err := Check(s)
		var r *Refusal
		if !errors.As(err, &r) {
			t.Errorf("Check(%q) = nil, want a refusal", s)
			continue
		}
		classes[r.Class]++
		if strings.ContainsAny(err.Error(), "<>[]＜＞［］") {
			t.Errorf("Check(%q) reason %q shows markup", s, err)
		}
	}
	for _, s := range clean {
		if err := Check(s); err != nil {
			t.Errorf("Check(%q) = %v, want nil", s, err)
		}
	}
	t.Logf("hostile refused by class: %v", classes)
}
