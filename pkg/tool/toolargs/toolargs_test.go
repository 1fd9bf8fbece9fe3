package toolargs

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	for _, s := range []string{"/", "/home/owner", "/home/owner/notes.md", "/a b/c", "/ünï/x", "/a/.hidden", "/a/..b", "/a/b..", "/a/...", "/a/b-c_d"} {
		if p, err := ParsePath(s); err != nil || p.String() != s {
			t.Errorf("ParsePath(%q) = %q, %v", s, p, err)
		}
	}
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"home/owner", "not absolute"},
		{"./x", "not absolute"},
		{"/home/../etc", `".." element`},
		{"/..", `".." element`},
		{"/home/owner/..", `".." element`},
		{"/home/./owner", `clean form; write "/home/owner"`},
		{"/home//owner", `clean form; write "/home/owner"`},
		{"/home/owner/", `clean form; write "/home/owner"`},
		{"//", `clean form; write "/"`},
		{"/a:b", "':' or ','"},
		{"/a,b", "':' or ','"},
		{"/a\x00b", "control character"},
		{"/a\nb", "control character"},
		{"/a\u0085b", "control character"},
		{"/a\xffb", "UTF-8"},
		{"/" + strings.Repeat("a", MaxPathLen), "longer than"},
	}
	for _, tt := range tests {
		p, err := ParsePath(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !p.IsZero() {
			t.Errorf("ParsePath(%q) = %q, %v; want an error containing %q", tt.in, p, err, tt.want)
		}
	}
}

func TestWithin(t *testing.T) {
	mp := func(s string) Path {
		p, err := ParsePath(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		p, root        string
		within, strict bool
	}{
		{"/home/a", "/home/a", true, false},
		{"/home/a/b", "/home/a", true, true},
		{"/home/ab", "/home/a", false, false},
		{"/home/a", "/home/ab", false, false},
		{"/home", "/home/a", false, false},
		{"/home/a.b", "/home/a", false, false},
		{"/x", "/", true, true},
		{"/", "/", true, false},
		{"/", "/x", false, false},
	}
	for _, tt := range tests {
		p, root := mp(tt.p), mp(tt.root)
		if got := p.Within(root); got != tt.within {
			t.Errorf("%q.Within(%q) = %v, want %v", tt.p, tt.root, got, tt.within)
		}
		if got := p.StrictlyWithin(root); got != tt.strict {
			t.Errorf("%q.StrictlyWithin(%q) = %v, want %v", tt.p, tt.root, got, tt.strict)
		}
	}
	if (Path{}).Within(mp("/")) || mp("/").Within(Path{}) {
		t.Error("the zero Path is within something")
	}
	if d := mp("/a/b").Dir(); d.String() != "/a" {
		t.Errorf("Dir = %q", d)
	}
	if d := mp("/a").Dir(); d.String() != "/" {
		t.Errorf("Dir = %q", d)
	}
}

func TestParseURL(t *testing.T) {
	for _, s := range []string{"https://example.com/", "http://example.com", "https://docs.python.org/3/library/os.html?x=1#frag", "https://Example.COM/a", "https://a.example/%2e%2e/x"} {
		u, err := ParseURL(s)
		if err != nil || u.String() != s {
			t.Errorf("ParseURL(%q) = %q, %v", s, u, err)
		}
	}
	if u, _ := ParseURL("https://Example.COM/a"); u.Host().String() != "example.com" {
		t.Errorf("host = %q, want it folded to lowercase", u.Host())
	}
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"ftp://example.com/", "scheme"},
		{"HTTPS://example.com/", "scheme"},
		{"file:///etc/passwd", "scheme"},
		{"example.com/x", "scheme"},
		{"https:example.com", "scheme"},
		{"https://user@example.com/", "user information"},
		{"https://user:pw@example.com/", "user information"},
		{"https://example.com:8443/", "port"},
		{"https://example.com:/", "port"},
		{"https://127.0.0.1/", "IP address"},
		{"https://127.1/", "IP address"},
		{"https://0x7f.1/", "does not start with a letter"},
		{"https://2130706433/", "single-label"},
		{"https://[::1]/", "IP address"},
		{"https://localhost/", "single-label"},
		{"https://example.com./", "trailing dot"},
		{"https://exa%6dple.com/", "escape"},
		{"https://a.com\\@b.com/", "percent-encoded"},
		{"https://example.com/a b", "percent-encoded"},
		{"https://example.com/\u00e9", "percent-encoded"},
		{"https:///x", "empty host"},
		{"https://example.com/a\tb", "percent-encoded"},
		{"https://*.example.com/", "wildcards"},
	}
	for _, tt := range tests {
		u, err := ParseURL(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !u.IsZero() {
			t.Errorf("ParseURL(%q) = %q, %v; want an error containing %q", tt.in, u, err, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		tool, raw, want string // want: the re-encoded form, or "!" + error text
	}{
		{"read_file", `{"path":"/home/o/a.md"}`, `{"path":"/home/o/a.md"}`},
		{"read_file", ` {"path" : "/x"} `, `{"path":"/x"}`},
		{"write_file", `{"path":"/d/f","content":"<b>&</b>\n"}`, `{"path":"/d/f","content":"<b>&</b>\n"}`},
		{"shell", `{"command":"ls -la","workdir":"/src"}`, `{"command":"ls -la","workdir":"/src"}`},
		{"http_fetch", `{"url":"https://example.com/x"}`, `{"url":"https://example.com/x"}`},
		{"recall", `{"query":"x","k":3}`, `{"query":"x","k":3}`},
		{"memory", `{}`, `{}`},
		{"read_file", `{"path":"/x","mode":"r"}`, "!unknown field"},
		{"read_file", `{"Path":"/x"}`, "!case differs"},
		{"read_file", `{"path":"/x","path":"/y"}`, "!duplicate key"},
		{"read_file", `{}`, "!missing field"},
		{"read_file", `{"path":null}`, "!null"},
		{"read_file", `{"path":"/x"} {}`, "!trailing data"},
		{"read_file", `["/x"]`, "!want an object"},
		{"read_file", `{"path":"x"}`, "!not absolute"},
		{"read_file", `{"path":"/a/../b"}`, `!".." element`},
		{"write_file", `{"path":"/a"}`, "!missing field"},
		{"shell", `{"command":"","workdir":"/src"}`, "!command: empty"},
		{"shell", `{"command":"a\u0000b","workdir":"/src"}`, "!NUL"},
		{"shell", `{"command":"ls","workdir":"src"}`, "!workdir: path"},
		{"http_fetch", `{"url":"http://127.0.0.1/"}`, "!IP address"},
		{"recall", `[]`, "!want an object"},
		{"recall", `{"a":1,"a":2}`, "!duplicate key"},
		{"memory", `null`, "!null"},
		{"call_tool", `{}`, "!unknown tool"},
		{"echo", `{}`, "!unknown tool"},
	}
	for _, tt := range tests {
		a, err := Parse(tt.tool, []byte(tt.raw))
		if want, isErr := strings.CutPrefix(tt.want, "!"); isErr {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Parse(%s, %s) = %v, %v; want an error containing %q", tt.tool, tt.raw, a, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%s, %s): %v", tt.tool, tt.raw, err)
			continue
		}
		if a.Tool() != tt.tool {
			t.Errorf("Parse(%s).Tool() = %q", tt.tool, a.Tool())
		}
		out, err := a.MarshalJSON()
		if err != nil || string(out) != tt.want {
			t.Errorf("Parse(%s, %s) re-encodes to %s, %v; want %s", tt.tool, tt.raw, out, err, tt.want)
		}
	}
	if _, err := Parse("nope", []byte(`{}`)); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("Parse(nope) = %v, want ErrUnknownTool", err)
	}
}

// FuzzParse: accepted arguments re-encode to a form that parses to the
// same value (the round trip approvals and the toolkit rely on).
func FuzzParse(f *testing.F) {
	for _, tt := range []struct{ tool, raw string }{
		{"read_file", `{"path":"/a"}`},
		{"write_file", `{"path":"/a/b","content":"x"}`},
		{"shell", `{"command":"ls","workdir":"/s"}`},
		{"http_fetch", `{"url":"https://example.com/"}`},
		{"consult", `{"question":"why?","context":"c"}`},
		{"consult", `{"question":"why?"}`},
		{"recall", `{"q":1}`},
	} {
		f.Add(tt.tool, []byte(tt.raw))
	}
	f.Fuzz(func(t *testing.T, tool string, raw []byte) {
		a, err := Parse(tool, raw)
		if err != nil {
			return
		}
		out, err := a.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted %s %q but cannot re-encode: %v", tool, raw, err)
		}
		b, err := Parse(tool, out)
		if err != nil {
			t.Fatalf("re-encoded %q does not parse: %v", out, err)
		}
		out2, _ := b.MarshalJSON()
		if string(out) != string(out2) {
			t.Fatalf("round trip changed %q to %q", out, out2)
		}
	})
}
