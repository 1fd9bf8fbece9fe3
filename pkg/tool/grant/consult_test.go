package grant

import (
	"strings"
	"testing"
)

const consultGrant = `[[grant]]
id = "c"
tool = "consult"
hosts = ["api.example.com"]
secret = "API_KEY"
model = "glm-5.3-flash"
max_taint = "private"
mode = "ask"
`

// TestConsultGrant: a consult grant names host, secret and model; its
// canonical form carries the model and untrusted_sessions; the rules
// (no secret data out, answers untrusted, keys consult alone takes) hold.
func TestConsultGrant(t *testing.T) {
	gs, ps := ParseFile("c.toml", []byte(consultGrant))
	if len(ps) > 0 {
		t.Fatalf("ParseFile: %v", ps)
	}
	g := gs[0]
	if g.Model() != "glm-5.3-flash" || g.Secret() != "API_KEY" || g.UntrustedSessions() || !g.Untrusted() || len(g.Hosts()) != 1 {
		t.Errorf("grant %s", g.Canonical())
	}
	if want := `"model":"glm-5.3-flash","untrusted_sessions":false,"memory":"stays"}`; !strings.HasSuffix(string(g.Canonical()), want) {
		t.Errorf("canonical %s, want it to end %s", g.Canonical(), want)
	}
	ok, _ := ParseFile("c.toml", []byte(consultGrant+"untrusted_sessions = true\n"))
	if len(ok) != 1 || !ok[0].UntrustedSessions() || ok[0].SHA256() == g.SHA256() {
		t.Errorf("untrusted_sessions = true not read, or not in the hash")
	}
	if pub, ps := ParseFile("c.toml", []byte(strings.Replace(consultGrant, `"private"`, `"public"`, 1))); len(ps) > 0 || pub[0].MaxTaint().String() != "public" {
		t.Errorf("a public consult grant (only public data out) refused: %v", ps)
	}
	if _, ps := ParseFile("f.toml", []byte("[[grant]]\nid = \"f\"\ntool = \"http_fetch\"\nhosts = [\"a.example\"]\nmax_taint = \"public\"\nmode = \"auto\"\n")); len(ps) == 0 {
		t.Error("a public http_fetch grant accepted: only consult takes public")
	}
	for _, tt := range []struct{ name, edit, want string }{
		{"no secret", `secret = "API_KEY"` + "\n", "needs secret"},
		{"no model", `model = "glm-5.3-flash"` + "\n", "needs model"},
		{"no hosts", `hosts = ["api.example.com"]` + "\n", "needs hosts"},
	} {
		_, ps := ParseFile("c.toml", []byte(strings.Replace(consultGrant, tt.edit, "", 1)))
		if len(ps) == 0 || !strings.Contains(ps[0].Reason, tt.want) {
			t.Errorf("%s: problems %v, want %q", tt.name, ps, tt.want)
		}
	}
	for _, tt := range []struct{ name, from, to, want string }{
		{"secret out", `max_taint = "private"`, `max_taint = "secret"`, "never leaves"},
		{"trusted answers", `mode = "ask"`, "mode = \"ask\"\nuntrusted = false", "text from outside"},
		{"bad model", `"glm-5.3-flash"`, `"glm\"x"`, "model"},
		{"model on fetch", `tool = "consult"`, `tool = "http_fetch"`, "only consult"},
	} {
		_, ps := ParseFile("c.toml", []byte(strings.Replace(consultGrant, tt.from, tt.to, 1)))
		if len(ps) == 0 || !strings.Contains(ps[0].Reason, tt.want) {
			t.Errorf("%s: problems %v, want %q", tt.name, ps, tt.want)
		}
	}
}

// TestConsultGrantMemory: a consult grant lets no memory text out unless
// its memory key says which, exactly; the word is in the canonical form
// (so in the hash the audit log names); a misspelling or another tool's
// grant with the key makes the directory invalid.
func TestConsultGrantMemory(t *testing.T) {
	stays, ps := ParseFile("c.toml", []byte(consultGrant))
	if len(ps) > 0 || stays[0].Memory() != MemoryStays {
		t.Fatalf("no memory key: %v %v, want stays", stays, ps)
	}
	seen := map[string]bool{stays[0].SHA256(): true}
	for _, tt := range []struct {
		word string
		want Memory
	}{{"stays", MemoryStays}, {"identity_may_leave", IdentityMayLeave}, {"all_may_leave", AllMayLeave}} {
		gs, ps := ParseFile("c.toml", []byte(consultGrant+"memory = \""+tt.word+"\"\n"))
		if len(ps) > 0 || gs[0].Memory() != tt.want || !strings.HasSuffix(string(gs[0].Canonical()), `"memory":"`+tt.word+`"}`) {
			t.Errorf("memory = %q: %v %v", tt.word, gs, ps)
			continue
		}
		if tt.want != MemoryStays && seen[gs[0].SHA256()] {
			t.Errorf("memory = %q does not change the grant's hash", tt.word)
		}
		seen[gs[0].SHA256()] = true
	}
	for _, bad := range []string{`"may_leave"`, `"Identity_may_leave"`, `"all"`, `""`, `true`, `"all_may_leave "`} {
		if _, ps := ParseFile("c.toml", []byte(consultGrant+"memory = "+bad+"\n")); len(ps) == 0 {
			t.Errorf("memory = %s accepted", bad)
		}
	}
	fetch := "[[grant]]\nid = \"f\"\ntool = \"http_fetch\"\nhosts = [\"a.example\"]\nmax_taint = \"private\"\nmode = \"auto\"\nmemory = \"stays\"\n"
	if _, ps := ParseFile("f.toml", []byte(fetch)); len(ps) == 0 || !strings.Contains(ps[0].Reason, "only consult") {
		t.Errorf("memory on http_fetch: %v", ps)
	}
}
