package grant

import (
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

const good = `
# A comment.
[[grant]]
id = "notes-read"
tool = "read_file"
paths = ["/home/owner/notes/", "/home/owner/docs"]
max_taint = "private"
mode = "auto"

[[grant]]
id = "fetch.docs_1"
tool = "http_fetch"
hosts = ["docs.python.org", "example.com"]
max_taint = "secret"
result_class = "public"
untrusted = false
expires = "2027-01-01T12:00:00+02:00"
mode = "ask"

[[grant]]
id = "shell-src"
tool = "shell"
paths = ["/home/owner/src"]
writable = true
max_taint = "secret"
mode = "deny"

[[grant]]
id = "shell-gh"
tool = "shell"
paths = ["/home/owner/src"]
secret = "GITHUB_TOKEN"
max_taint = "private"
mode = "ask"
`

func TestParseFileAccepts(t *testing.T) {
	gs, ps := ParseFile("g.toml", []byte(good))
	if len(ps) > 0 {
		t.Fatalf("ParseFile: %v", ps)
	}
	if len(gs) != 4 {
		t.Fatalf("got %d grants, want 4", len(gs))
	}
	r, f, s, gh := gs[0], gs[1], gs[2], gs[3]
	if r.ID() != "notes-read" || r.Tool() != "read_file" || r.Mode() != Auto || r.MaxTaint() != dataclass.Private || r.File() != "g.toml" {
		t.Errorf("read grant = %+v", r)
	}
	if p := r.Paths(); len(p) != 2 || p[0].String() != "/home/owner/docs" || p[1].String() != "/home/owner/notes" {
		t.Errorf("paths = %v, want cleaned and sorted", p)
	}
	if r.ResultClass() != dataclass.Private || !r.Untrusted() || r.Writable() || r.Hosts() != nil {
		t.Errorf("defaults: class %v untrusted %v writable %v hosts %v", r.ResultClass(), r.Untrusted(), r.Writable(), r.Hosts())
	}
	if _, ok := r.Expires(); ok || !r.ActiveAt(time.Unix(1<<40, 0)) {
		t.Error("a grant without expires expires")
	}
	if f.ResultClass() != dataclass.Public || f.Untrusted() || f.Mode() != Ask || len(f.Hosts()) != 2 || f.Paths() != nil {
		t.Errorf("fetch grant = %+v", f)
	}
	exp, ok := f.Expires()
	if !ok || !exp.Equal(time.Date(2027, 1, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("expires = %v, %v", exp, ok)
	}
	if !f.ActiveAt(exp.Add(-time.Nanosecond)) || f.ActiveAt(exp) || f.ActiveAt(exp.Add(time.Second)) {
		t.Error("a grant must match strictly before its expiry and never at or after it")
	}
	if !s.Writable() || s.Mode() != Deny || s.Secret() != "" {
		t.Errorf("shell grant = %+v", s)
	}
	if gh.Secret() != "GITHUB_TOKEN" || !strings.Contains(string(gh.Canonical()), `"secret":"GITHUB_TOKEN"`) {
		t.Errorf("secret grant: Secret() = %q, canonical %s", gh.Secret(), gh.Canonical())
	}
	if strings.Contains(string(s.Canonical()), `"secret":`) {
		t.Errorf("a grant without a secret writes one in its canonical form: %s", s.Canonical())
	}
}

// TestParseFileRefuses has one case per refusal in the brief and the
// decision log; each message must name the file, the grant and the reason.
func TestParseFileRefuses(t *testing.T) {
	grant := func(lines ...string) string {
		return "[[grant]]\nid = \"g1\"\n" + strings.Join(lines, "\n") + "\n"
	}
	rf := func(extra ...string) string {
		return grant(append([]string{`tool = "read_file"`, `paths = ["/home/o"]`, `max_taint = "private"`, `mode = "auto"`}, extra...)...)
	}
	tests := []struct{ name, in, grant, want string }{
		{"deny below secret", grant(`tool = "shell"`, `paths = ["/x"]`, `max_taint = "private"`, `mode = "deny"`), "g1", `deny grant must have max_taint = "secret"`},
		{"path is root", grant(`tool = "read_file"`, `paths = ["/"]`, `max_taint = "private"`, `mode = "auto"`), "g1", "whole file system"},
		{"path cleans to root", grant(`tool = "read_file"`, `paths = ["//"]`, `max_taint = "private"`, `mode = "auto"`), "g1", "whole file system"},
		{"path dot cleans to root", grant(`tool = "read_file"`, `paths = ["/./"]`, `max_taint = "private"`, `mode = "auto"`), "g1", "whole file system"},
		{"path dotdot", grant(`tool = "read_file"`, `paths = ["/home/.."]`, `max_taint = "private"`, `mode = "auto"`), "g1", `contains ".."`},
		{"path relative", grant(`tool = "read_file"`, `paths = ["home/o"]`, `max_taint = "private"`, `mode = "auto"`), "g1", "relative"},
		{"path tilde", grant(`tool = "read_file"`, `paths = ["~/notes"]`, `max_taint = "private"`, `mode = "auto"`), "g1", "relative"},
		{"path empty", grant(`tool = "read_file"`, `paths = [""]`, `max_taint = "private"`, `mode = "auto"`), "g1", "relative"},
		{"path colon", grant(`tool = "read_file"`, `paths = ["/a:b"]`, `max_taint = "private"`, `mode = "auto"`), "g1", "':' or ','"},
		{"path comma", grant(`tool = "write_file"`, `paths = ["/a,b"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "':' or ','"},
		{"path twice", grant(`tool = "read_file"`, `paths = ["/a", "/a/"]`, `max_taint = "private"`, `mode = "auto"`), "g1", "listed twice"},
		{"no paths", grant(`tool = "read_file"`, `max_taint = "private"`, `mode = "auto"`), "g1", "read_file needs paths"},
		{"empty paths", grant(`tool = "shell"`, `paths = []`, `max_taint = "private"`, `mode = "ask"`), "g1", "shell needs paths"},
		{"hosts on file tool", rf(`hosts = ["example.com"]`), "g1", "read_file takes paths, not hosts"},
		{"paths on http_fetch", grant(`tool = "http_fetch"`, `paths = ["/x"]`, `hosts = ["a.com"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "http_fetch takes hosts, not paths"},
		{"no hosts", grant(`tool = "http_fetch"`, `max_taint = "private"`, `mode = "ask"`), "g1", "http_fetch needs hosts"},
		{"writable on read_file", rf(`writable = false`), "g1", "read_file does not take writable"},
		{"host 127.0.0.1", grant(`tool = "http_fetch"`, `hosts = ["127.0.0.1"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "IP address"},
		{"host 127.1", grant(`tool = "http_fetch"`, `hosts = ["127.1"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "IP address"},
		{"host 0x7f.1", grant(`tool = "http_fetch"`, `hosts = ["0x7f.1"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "does not start with a letter"},
		{"host 2130706433", grant(`tool = "http_fetch"`, `hosts = ["2130706433"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "single-label"},
		{"host [::1]", grant(`tool = "http_fetch"`, `hosts = ["[::1]"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "IP address"},
		{"host ::1", grant(`tool = "http_fetch"`, `hosts = ["::1"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "IP address"},
		{"host last label digit", grant(`tool = "http_fetch"`, `hosts = ["example.4x"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "does not start with a letter"},
		{"host not dns", grant(`tool = "http_fetch"`, `hosts = ["ex_ample.com"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "not allowed in a host name"},
		{"host wildcard", grant(`tool = "http_fetch"`, `hosts = ["*.example.com"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "wildcards"},
		{"host uppercase", grant(`tool = "http_fetch"`, `hosts = ["Example.com"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "lowercase"},
		{"host url", grant(`tool = "http_fetch"`, `hosts = ["https://example.com"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "not a URL"},
		{"host twice", grant(`tool = "http_fetch"`, `hosts = ["a.com", "a.com"]`, `max_taint = "private"`, `mode = "ask"`), "g1", "listed twice"},
		{"secret on read_file", rf(`secret = "TOKEN"`), "g1", "read_file does not take secret"},
		{"secret on http_fetch", grant(`tool = "http_fetch"`, `hosts = ["a.com"]`, `secret = "TOKEN"`, `max_taint = "private"`, `mode = "ask"`), "g1", "http_fetch does not take secret"},
		{"secret backend ref", grant(`tool = "shell"`, `paths = ["/x"]`, `secret = "credential:token"`, `max_taint = "private"`, `mode = "ask"`), "g1", "uppercase letters"},
		{"secret lowercase", grant(`tool = "shell"`, `paths = ["/x"]`, `secret = "token"`, `max_taint = "private"`, `mode = "ask"`), "g1", "uppercase letters"},
		{"secret path", grant(`tool = "shell"`, `paths = ["/x"]`, `secret = "../TOKEN"`, `max_taint = "private"`, `mode = "ask"`), "g1", "uppercase letters"},
		{"secret too long", grant(`tool = "shell"`, `paths = ["/x"]`, `secret = "A`+strings.Repeat("B", 64)+`"`, `max_taint = "private"`, `mode = "ask"`), "g1", "uppercase letters"},
		{"secret table", rf(`secret = { name = "x" }`), "g1", "secret must be a string"},
		{"patterns key", rf(`patterns = ["ls *"]`), "g1", "patterns are not allowed"},
		{"unknown key", rf(`class = "private"`), "g1", `unknown key "class"`},
		{"case differs", grant(`Tool = "read_file"`, `paths = ["/x"]`, `max_taint = "private"`, `mode = "auto"`), "g1", `case differs from the declared key "tool"`},
		{"case differs secret", rf(`Secret = "x"`), "g1", `case differs from the declared key "secret"`},
		{"duplicate key", rf(`mode = "deny"`), "g1", "already been defined"},
		{"duplicate quoted key", rf(`"mode" = "deny"`), "g1", "already been defined"},
		{"same key in two cases", rf(`MODE = "deny"`), "g1", `case differs from the declared key "mode"`},
		{"dotted key", rf(`paths.extra = 1`), "g1", "paths must be an array of strings"},
		{"subtable", rf(`[grant.options]`, `x = 1`), "g1", `unknown key "options"`},
		{"unknown tool", grant(`tool = "exec"`, `paths = ["/x"]`, `max_taint = "private"`, `mode = "auto"`), "g1", `"exec" is not a tool grants can name`},
		{"call_tool", grant(`tool = "call_tool"`, `max_taint = "private"`, `mode = "auto"`), "g1", "not a tool grants can name"},
		{"tool case", grant(`tool = "Read_File"`, `paths = ["/x"]`, `max_taint = "private"`, `mode = "auto"`), "g1", "not a tool grants can name"},
		{"recall", grant(`tool = "recall"`, `max_taint = "secret"`, `mode = "deny"`), "g1", "memory tool"},
		{"ask_memory", grant(`tool = "ask_memory"`, `max_taint = "private"`, `mode = "auto"`), "g1", "memory tool"},
		{"memory", grant(`tool = "memory"`, `max_taint = "secret"`, `mode = "deny"`), "g1", "memory tool"},
		{"no tool", grant(`paths = ["/x"]`, `max_taint = "private"`, `mode = "auto"`), "g1", "tool is missing"},
		{"no mode", grant(`tool = "read_file"`, `paths = ["/x"]`, `max_taint = "private"`), "g1", "mode is missing"},
		{"bad mode", grant(`tool = "read_file"`, `paths = ["/x"]`, `max_taint = "private"`, `mode = "allow"`), "g1", `mode "allow" is not auto, ask or deny`},
		{"mode case", grant(`tool = "read_file"`, `paths = ["/x"]`, `max_taint = "private"`, `mode = "Auto"`), "g1", "not auto, ask or deny"},
		{"no max_taint", grant(`tool = "read_file"`, `paths = ["/x"]`, `mode = "auto"`), "g1", "max_taint is missing"},
		{"bad max_taint", grant(`tool = "read_file"`, `paths = ["/x"]`, `max_taint = "Secret"`, `mode = "auto"`), "g1", "max_taint"},
		{"public max_taint", grant(`tool = "read_file"`, `paths = ["/x"]`, `max_taint = "public"`, `mode = "auto"`), "g1", "never applies"},
		{"bad result_class", rf(`result_class = "confidential"`), "g1", "result_class"},
		{"untrusted string", rf(`untrusted = "no"`), "g1", "untrusted must be true or false"},
		{"expires bad", rf(`expires = "2027-01-01"`), "g1", "RFC 3339"},
		{"expires no zone", rf(`expires = "2027-01-01T00:00:00"`), "g1", "RFC 3339"},
		{"expires toml date", rf(`expires = 2027-01-01T00:00:00Z`), "g1", "quoted RFC 3339 string"},
		{"float", rf(`max = 1.5`), "g1", `unknown key "max"`},
		{"paths not strings", grant(`tool = "read_file"`, `paths = [1]`, `max_taint = "private"`, `mode = "auto"`), "g1", "array of strings"},
		{"paths string", grant(`tool = "read_file"`, `paths = "/x"`, `max_taint = "private"`, `mode = "auto"`), "g1", "paths must be an array of strings"},
		{"no id", "[[grant]]\ntool = \"read_file\"\npaths = [\"/x\"]\nmax_taint = \"private\"\nmode = \"auto\"\n", "#1", "id is missing"},
		{"bad id", "[[grant]]\nid = \"Notes Read\"\ntool = \"read_file\"\npaths = [\"/x\"]\nmax_taint = \"private\"\nmode = \"auto\"\n", "#1", "must be 1 to 64"},
		{"duplicate id in file", rf() + rf(), "g1", "ids must be unique"},
		{"empty file", "# nothing here\n", "", "holds no [[grant]] tables"},
		{"top-level key", "mode = \"auto\"\n" + rf(), "", `unknown key "mode"; a grant file holds only [[grant]] tables`},
		{"top-level case", "[[Grant]]\nid = \"x\"\n", "", `case differs from the declared key "grant"`},
		{"not a table", "grant = 1\n", "", "array of tables"},
		{"syntax", rf(`paths = [`), "g1", "line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs, ps := parseForTest("bad.toml", tt.in)
			if gs != nil || len(ps) == 0 {
				t.Fatalf("ParseFile accepted:\n%s", tt.in)
			}
			found := false
			for _, p := range ps {
				if p.File == "bad.toml" && p.Grant == tt.grant && strings.Contains(p.Reason, tt.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("problems %q; want one for file bad.toml, grant %q, containing %q", ps, tt.grant, tt.want)
			}
		})
	}
}

// parseForTest runs ParseFile and, like LoadDir, the cross-grant checks.
func parseForTest(name, in string) ([]Grant, []Problem) {
	gs, ps := ParseFile(name, []byte(in))
	if len(ps) > 0 {
		return nil, ps
	}
	if ps := duplicates(gs); len(ps) > 0 {
		return nil, ps
	}
	return gs, nil
}

func TestProblemString(t *testing.T) {
	for _, tt := range []struct {
		p    Problem
		want string
	}{
		{Problem{"a.toml", "g", "bad"}, "a.toml: grant g: bad"},
		{Problem{"a.toml", "", "bad"}, "a.toml: bad"},
		{Problem{"", "", "bad"}, "bad"},
		{Problem{"a\nb.toml", "", "bad\u202e"}, `a\nb.toml: bad\u202e`},
	} {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestGrantAtLine(t *testing.T) {
	src := "# c\n[[grant]]\nid = \"a\"\nx = 1\n\n[[grant]]\nmode = \"x\"\nmode = \"y\"\n[[grant]]\nid = \"c\"\n"
	for _, tt := range []struct {
		line int
		want string
	}{{0, ""}, {1, ""}, {4, "a"}, {8, "#2"}, {11, "c"}} {
		if got := grantAtLine([]byte(src), tt.line); got != tt.want {
			t.Errorf("grantAtLine(%d) = %q, want %q", tt.line, got, tt.want)
		}
	}
}
