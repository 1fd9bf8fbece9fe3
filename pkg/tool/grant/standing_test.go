package grant

import (
	"strings"
	"testing"
)

func TestStanding(t *testing.T) {
	base := func(tool, mode, target string) string {
		return "[[grant]]\nid = \"a\"\ntool = \"" + tool + "\"\n" + target + "\nmax_taint = \"secret\"\nmode = \"" + mode + "\"\nstanding = true\n"
	}
	for _, tt := range []struct{ name, in, want string }{
		{"file", base("read_file", "auto", `paths = ["/home/owner/a.pdf"]`), ""},
		{"host", base("http_fetch", "auto", `hosts = ["example.com"]`), ""},
		{"shell", base("shell", "auto", `paths = ["/home/owner/src"]`), "read_file and http_fetch only"},
		{"write_file", base("write_file", "auto", `paths = ["/home/owner/src"]`), "read_file and http_fetch only"},
		{"ask", base("read_file", "ask", `paths = ["/home/owner/a.pdf"]`), "mode is auto"},
		{"two paths", base("read_file", "auto", `paths = ["/home/owner/a", "/home/owner/b"]`), "exactly one"},
		{"two hosts", base("http_fetch", "auto", `hosts = ["a.example", "b.example"]`), "exactly one"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gs, ps := ParseFile("g.toml", []byte(tt.in))
			switch {
			case tt.want == "" && (len(ps) > 0 || len(gs) != 1 || !gs[0].Standing()):
				t.Errorf("refused: %v", ps)
			case tt.want != "" && (len(ps) == 0 || !strings.Contains(ps[0].String(), tt.want)):
				t.Errorf("problems %v, want %q", ps, tt.want)
			}
		})
	}
	// Earlier grants keep their hashes: standing is absent unless true.
	gs, _ := ParseFile("g.toml", []byte(strings.Replace(base("read_file", "auto", `paths = ["/home/owner/a.pdf"]`), "standing = true\n", "standing = false\n", 1)))
	if len(gs) != 1 || strings.Contains(string(gs[0].Canonical()), "standing") {
		t.Errorf("a grant with standing = false: %s", gs[0].Canonical())
	}
}
