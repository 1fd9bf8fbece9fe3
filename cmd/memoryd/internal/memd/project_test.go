package memd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

const (
	chanA = "aaaaaaaaaaaaaaaaaaaaaaaaaa"
	chanB = "bbbbbbbbbbbbbbbbbbbbbbbbbb"
	chanX = "xxxxxxxxxxxxxxxxxxxxxxxxxx" // in no project
)

func twoProjects(t *testing.T) *harness {
	t.Helper()
	return startWith(t, []memoryd.Project{{Name: "alpha", Channels: []string{chanA}, Trust: "trusted"}, {Name: "beta", Channels: []string{chanB}}})
}

// epoch tells memoryd a session's epoch started, in channel ch.
func (h *harness) epoch(t *testing.T, session, ch string) {
	t.Helper()
	if _, ok := h.ask(t, h.cfg.MemorySocketDir, &wire.Memory, &wire.IdentityRequest{Session: session, Channel: ch}).(*wire.IdentityBlock); !ok {
		t.Fatalf("identity request for %s in %q refused", session, ch)
	}
}

func (h *harness) recalls(t *testing.T, session, query, want string) (bool, *wire.ToolResult) {
	t.Helper()
	r := h.tool(t, session, "recall", `{"query":"`+query+`","k":10}`, dataclass.Private, false)
	return strings.Contains(r.Output, want), r
}

// TestProjectsWallRecall: a note written in project alpha's thread is
// recalled there, not in project beta's, not in a thread of no project
// or of no channel; a note of no project is recalled everywhere; a
// session known only by its baseline (memoryd restarted) is placed by
// it; an untrusted project's hits are memory-tainted; the walls hold
// after a reindex.
func TestProjectsWallRecall(t *testing.T) {
	h := twoProjects(t)
	for s, ch := range map[string]string{"sa": chanA, "sb": chanB, "sx": chanX, "sn": ""} {
		h.epoch(t, s, ch)
	}
	h.tool(t, "sa", "memory", `{"action":"note","text":"The alpha boiler code is kestrel."}`, dataclass.Private, false)
	h.tool(t, "sx", "memory", `{"action":"note","text":"The owner's heron is called Grey."}`, dataclass.Private, false)
	// Session sd never asked for its identity in this memoryd's life:
	// its baseline says channel B.
	dir := filepath.Join(h.cfg.StateDir, "sessions", "sd")
	os.MkdirAll(dir, 0o750)
	if err := os.WriteFile(filepath.Join(dir, "0.baseline.json"), []byte(`{"system":"x","tools":[],"channel":"`+chanB+`"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	h.tool(t, "sd", "memory", `{"action":"note","text":"The beta launch word is osprey."}`, dataclass.Private, false)
	check := func() {
		t.Helper()
		for _, tt := range []struct {
			session, query string
			want           bool
		}{
			{"sa", "kestrel", true}, {"sb", "kestrel", false}, {"sx", "kestrel", false}, {"sn", "kestrel", false},
			{"sa", "heron", true}, {"sb", "heron", true}, {"sn", "heron", true},
			{"sb", "osprey", true}, {"sa", "osprey", false}, {"sx", "osprey", false},
		} {
			if got, r := h.recalls(t, tt.session, tt.query, "from=note"); got != tt.want {
				t.Errorf("recall %q in %s found it = %v, want %v:\n%s", tt.query, tt.session, got, tt.want, r.Output)
			}
		}
		if _, r := h.recalls(t, "sa", "kestrel", ""); !strings.Contains(r.Output, "(project alpha)") || strings.Contains(r.Output, "memory-tainted") || r.Untrusted {
			t.Errorf("a trusted project's hit is labelled:\n%s", r.Output)
		}
		if _, r := h.recalls(t, "sb", "osprey", ""); !strings.Contains(r.Output, "source=memory-tainted") || !r.Untrusted {
			t.Errorf("an untrusted project's hit is not memory-tainted:\n%s", r.Output)
		}
	}
	check()
	if _, ok := h.admin(t, &wire.Reindex{}).(*wire.MemoryDone); !ok {
		t.Fatal("reindex failed")
	}
	check()
}

// TestProjectThreadWrites: a project's thread notes (the project's
// memory) but never edits identity, which is in every thread's prompt;
// a read-only project's thread writes nothing; a thread outside every
// project edits identity as before.
func TestProjectThreadWrites(t *testing.T) {
	h := startWith(t, []memoryd.Project{{Name: "alpha", Channels: []string{chanA}}, {Name: "gamma", Channels: []string{chanB}, ReadOnly: true}})
	for s, ch := range map[string]string{"sa": chanA, "sg": chanB, "sx": ""} {
		h.epoch(t, s, ch)
	}
	for _, tt := range []struct{ session, args, want string }{
		{"sa", `{"action":"add","file":"user","text":"The owner works on alpha."}`, "a project's thread writes only notes"},
		{"sa", `{"action":"note","text":"alpha ships in May"}`, "noted as n1"},
		{"sg", `{"action":"note","text":"gamma ships in June"}`, "project gamma, which this agent only reads"},
		{"sx", `{"action":"add","file":"user","text":"The owner likes tea."}`, "user.md: add done"},
	} {
		r := h.tool(t, tt.session, "memory", tt.args, dataclass.Private, false)
		if !strings.Contains(r.Output, tt.want) {
			t.Errorf("%s %s = %q, want %q", tt.session, tt.args, r.Output, tt.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(h.cfg.StateDir, "memory", "user.md")); strings.Contains(string(b), "alpha") {
		t.Errorf("a project's thread edited user.md:\n%s", b)
	}
}

// TestProjectConfigRefusals: memoryd.toml's [[project]] tables.
func TestProjectConfigRefusals(t *testing.T) {
	base := ""
	for _, tt := range []struct{ toml, want string }{
		{`[[project]]` + "\nname = \"Alpha\"\nchannels = [\"" + chanA + "\"]\n", "name \"Alpha\""},
		{`[[project]]` + "\nname = \"alpha\"\nchannels = []\n", "has no channels and no threads"},
		{`[[project]]` + "\nname = \"alpha\"\nchannels = [\"general\"]\n", "not a Mattermost channel id"},
		{`[[project]]` + "\nname = \"a\"\nchannels = [\"" + chanA + "\"]\n[[project]]\nname = \"b\"\nchannels = [\"" + chanA + "\"]\n", "in projects a and b"},
		{`[[project]]` + "\nname = \"a\"\nchannels = [\"" + chanA + "\"]\n[[project]]\nname = \"a\"\nchannels = [\"" + chanB + "\"]\n", "used twice"},
		{`[[project]]` + "\nname = \"a\"\nchannels = [\"" + chanA + "\"]\ntrust = \"yes\"\n", "trust is \"yes\""},
		{`[[project]]` + "\nname = \"a\"\nchannels = [\"" + chanA + "\"]\ntrusted_workspace = \"a-t\"\n", "give both trusted_workspace and untrusted_workspace"},
		{`[[project]]` + "\nname = \"a\"\nchannels = [\"" + chanA + "\"]\ntrusted_workspace = \"a-t\"\nuntrusted_workspace = \"a-u\"\n", "has no [honcho] table"},
		{"[honcho]\nurl = \"http://127.0.0.1:8000\"\npeer = \"agent\"\ntrusted_workspace = \"h-t\"\nuntrusted_workspace = \"h-u\"\n\n[[project]]\nname = \"a\"\nchannels = [\"" + chanA + "\"]\ntrusted_workspace = \"a-t\"\nuntrusted_workspace = \"h-u\"\n", "workspace h-u is also this agent's"},
		{"[honcho]\nurl = \"http://127.0.0.1:8000\"\npeer = \"agent\"\ntrusted_workspace = \"h-t\"\nuntrusted_workspace = \"h-u\"\n\n[[project]]\nname = \"a\"\nchannels = [\"" + chanA + "\"]\ntrusted_workspace = \"a-t\"\nuntrusted_workspace = \"a-u\"\n[[project]]\nname = \"b\"\nchannels = [\"" + chanB + "\"]\ntrusted_workspace = \"b-t\"\nuntrusted_workspace = \"a-u\"\n", "workspace a-u is also a's"},
	} {
		_, _, err := memoryd.Parse([]byte(base+tt.toml), "memoryd.toml", "/s")
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "docs/runbook.md#memory-project-refused") {
			t.Errorf("Parse(%q) = %v, want %q", tt.toml, err, tt.want)
		}
	}
	c, _, err := memoryd.Parse([]byte(base+"[[project]]\nname = \"alpha\"\nchannels = [\""+chanA+"\"]\n"), "memoryd.toml", "/s")
	if p, ok := c.ProjectOf(chanA); err != nil || !ok || p.Name != "alpha" || p.Trusted() {
		t.Errorf("ProjectOf = %+v %v %v", p, ok, err)
	}
	if _, ok := c.ProjectOf(""); ok {
		t.Error("no channel is in a project")
	}
}

// TestProjectThreads: a thread a project lists is the project's whatever
// its channel (a direct message, or another project's channel); the
// other threads of that channel keep theirs.
func TestProjectThreads(t *testing.T) {
	const listed, inB = "llllllllllllllllllllllllll", "mmmmmmmmmmmmmmmmmmmmmmmmmm"
	h := startWith(t, []memoryd.Project{{Name: "alpha", Channels: []string{chanA}, Threads: []string{listed, inB}, Trust: "trusted"}, {Name: "beta", Channels: []string{chanB}}})
	for s, ch := range map[string]string{"mm-" + listed: "", "mm-" + inB: chanB, "sb": chanB, "sa": chanA, "sx": ""} {
		h.epoch(t, s, ch)
	}
	h.tool(t, "mm-"+listed, "memory", `{"action":"note","text":"The alpha boiler code is kestrel."}`, dataclass.Private, false)
	for _, tt := range []struct {
		session string
		want    bool
	}{{"mm-" + listed, true}, {"sa", true}, {"mm-" + inB, true}, {"sb", false}, {"sx", false}} {
		if got, r := h.recalls(t, tt.session, "kestrel", "(project alpha)"); got != tt.want {
			t.Errorf("recall in %s found alpha's note = %v, want %v:\n%s", tt.session, got, tt.want, r.Output)
		}
	}
	if r := h.tool(t, "mm-"+inB, "memory", `{"action":"add","file":"user","text":"x"}`, dataclass.Private, false); !strings.Contains(r.Output, "project alpha") {
		t.Errorf("an identity edit in alpha's listed thread = %q", r.Output)
	}
	_, _, err := memoryd.Parse([]byte(
		"[[project]]\nname = \"a\"\nthreads = [\""+listed+"\"]\n[[project]]\nname = \"b\"\nthreads = [\""+listed+"\"]\n"), "memoryd.toml", "/s")
	if err == nil || !strings.Contains(err.Error(), "in projects a and b") {
		t.Errorf("a thread in two projects = %v", err)
	}
}
