package grant

import (
	"strings"
	"testing"
)

// TestMCPGrants: an MCP grant names one tool of one server exactly, may
// mount paths and reach listed hosts, and takes nothing else.
func TestMCPGrants(t *testing.T) {
	head := "[[grant]]\nid = \"g\"\ntool = \"mcp.files.read_text_file\"\nmax_taint = \"secret\"\nmode = \"auto\"\n"
	gs, ps := ParseFile("m.toml", []byte(head+"paths = [\"/home/owner/notes/\"]\nhosts = [\"api.example.com\"]\nwritable = false\n"))
	if len(ps) > 0 {
		t.Fatalf("ParseFile = %v", ps)
	}
	g := gs[0]
	if g.Tool() != "mcp.files.read_text_file" || len(g.Paths()) != 1 || g.Paths()[0].String() != "/home/owner/notes" || len(g.Hosts()) != 1 || g.Writable() {
		t.Errorf("grant = %+v", g)
	}
	if !strings.Contains(string(g.Canonical()), `"writable":false`) {
		t.Errorf("canonical %s lacks writable", g.Canonical())
	}
	if gs, ps := ParseFile("m.toml", []byte(head)); len(ps) > 0 || len(gs[0].Hosts()) != 0 || len(gs[0].Paths()) != 0 {
		t.Errorf("a bare MCP grant: %v, %v (want no mounts, no network)", gs, ps)
	}
	for _, tt := range []struct{ extra, want string }{
		{"hosts = []\n", "leave hosts out"},
		{"paths = []\n", "leave paths out"},
		{"hosts = [\"*\"]\n", "host"},
		{"hosts = [\"*.example.com\"]\n", "host"},
		{"secret = \"TOKEN\"\n", "declaration"},
		{"standing = true\n", "standing"},
		{"writable = true\n", "mounts none"},
		{"paths = [\"/\"]\n", "whole file system"},
		{"model = \"m\"\n", "only consult"},
	} {
		if _, ps := ParseFile("m.toml", []byte(head+tt.extra)); len(ps) == 0 || !strings.Contains(ps[0].Reason, tt.want) {
			t.Errorf("ParseFile(+%q) = %v, want %q", tt.extra, ps, tt.want)
		}
	}
	for _, name := range []string{"mcp.files.*", "mcp.files", "mcp.Files.x", "mcp", "mcp.files.a b"} {
		text := strings.Replace(head, "mcp.files.read_text_file", name, 1)
		if _, ps := ParseFile("m.toml", []byte(text)); len(ps) == 0 {
			t.Errorf("tool %q was accepted", name)
		}
	}
}
