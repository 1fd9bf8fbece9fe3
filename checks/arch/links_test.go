package arch

import (
	"strings"
	"testing"
)

func TestRepoLinks(t *testing.T) { report(t, Links(root)) }

// A broken file link, a missing anchor and a long README are each caught;
// a good link, a heading's anchor and an outside address are not.
func TestLinksCatchesPlanted(t *testing.T) {
	long := strings.Repeat("line\n", ReadmeMaxLines+1)
	dir := plant(t, map[string]string{
		"README.md": long + "[a](docs/a.md) [b](docs/b.md#there-it-is) [c](docs/gone.md) [d](docs/a.md#nowhere) [e](https://x.example/y)\n",
		"docs/a.md": "# A\n\n```sh\n# nowhere\n```\n",
		"docs/b.md": "# B\n\n## There: it is\n",
	})
	got := strings.Join(Links(dir), "\n")
	for _, want := range []string{"more than", "docs/gone.md: no such file", "docs/a.md#nowhere: no heading"} {
		if !strings.Contains(got, want) {
			t.Errorf("Links missed %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "there-it-is") || strings.Contains(got, "x.example") {
		t.Errorf("Links refused a good link:\n%s", got)
	}
}
