package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
)

const mcpImage = "sha256:8f1c0a6b9e2d4c3f5a7b8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"

// catalog declares server files (with secret TOKEN) pinned with one tool,
// read_text_file, and server bare declared but unpinned.
func catalog(t *testing.T) *mcpserver.Catalog {
	t.Helper()
	files, err := mcpserver.NewServer("files", mcpserver.Spec{Image: mcpImage, Command: []string{"/usr/bin/node", "/srv/fs.js", "/home/owner/notes"}, Secret: "TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	bare, _ := mcpserver.NewServer("bare", mcpserver.Spec{Image: mcpImage, Command: []string{"/bin/bare"}})
	tools, err := mcppin.NewListing([]mcppin.Listed{{Name: "read_text_file", Description: "Reads a file.", InputSchema: []byte(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	pin, err := mcppin.NewPin("files", mcpImage, tools)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mcpserver.NewCatalog(mcpserver.Entry{Server: files, Pin: &pin}, mcpserver.Entry{Server: bare, Why: "it has no pin file bare.pin.json"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mcpReq(t *testing.T, tool string, c *mcpserver.Catalog) Request {
	args, _ := json.Marshal(map[string]any{"name": tool, "arguments": map[string]any{"path": "/home/owner/notes/a.md", "n": 1.5}})
	return Request{Tool: "call_tool", Arguments: args, MCP: c}
}

// TestMCPDecisions is rule 11: grants first (no grant, deny), then the
// pin; an allowed call carries the winning grant's mounts and hosts, the
// declaration's secret and the pinned sums.
func TestMCPDecisions(t *testing.T) {
	cat := catalog(t)
	const tool = "mcp.files.read_text_file"
	auto := g("fs", tool, "auto", "paths", `["/home/owner/notes"]`, "hosts", `["api.example.com"]`, "result_class", `"secret"`)

	d, ask, den := Decide(set(t, auto), mcpReq(t, tool, cat), private, now)
	if den != nil || ask != nil || !d.Valid() {
		t.Fatalf("auto: %v %v", ask, den)
	}
	m, ok := d.MCP()
	if !ok || m.Server.Name() != "files" || m.Tool.Name != "read_text_file" || m.ListingSHA256 == "" {
		t.Errorf("MCP() = %+v, %v", m, ok)
	}
	if ms := d.Mounts(); len(ms) != 1 || ms[0].Path.String() != "/home/owner/notes" || ms[0].Writable {
		t.Errorf("Mounts() = %v", ms)
	}
	if h := d.Hosts(); len(h) != 1 || h[0].String() != "api.example.com" {
		t.Errorf("Hosts() = %v", h)
	}
	if d.Secret() != "TOKEN" || d.Class() != dataclass.Secret || !d.Untrusted() || d.Tool() != tool || !d.ViaCallTool() {
		t.Errorf("secret %q class %v untrusted %v tool %q", d.Secret(), d.Class(), d.Untrusted(), d.Tool())
	}

	for _, tt := range []struct {
		name   string
		grants []string
		tool   string
		cat    *mcpserver.Catalog
		reason Reason
		want   string
	}{
		{"no grant", nil, tool, cat, NoGrant, "no grant allows"},
		{"grant for another tool", []string{g("x", "mcp.files.write_file", "auto")}, tool, cat, NoGrant, ""},
		{"deny", []string{auto, g("no", tool, "deny")}, tool, cat, DeniedByGrant, "denied by grant"},
		{"unpinned", []string{g("b", "mcp.bare.x", "auto")}, "mcp.bare.x", cat, MCPUnpinned, "is not pinned"},
		{"undeclared", []string{g("u", "mcp.ghost.x", "auto")}, "mcp.ghost.x", cat, MCPUnpinned, "no server ghost"},
		{"not in pin", []string{g("w", "mcp.files.write_file", "auto")}, "mcp.files.write_file", cat, MCPUnpinned, "lists no tool write_file"},
		{"invalid catalog", []string{auto}, tool, &mcpserver.Catalog{}, MCPUnpinned, "invalid"},
		{"no catalog", []string{auto}, tool, nil, MCPUnpinned, "invalid"},
		{"ask unpinned", []string{g("b", "mcp.bare.x", "ask")}, "mcp.bare.x", cat, MCPUnpinned, "bxctl mcp pin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, ask, den := Decide(set(t, tt.grants...), mcpReq(t, tt.tool, tt.cat), private, now)
			if d.Valid() || ask != nil || den == nil || den.Reason != tt.reason {
				t.Fatalf("Decide = valid %v, ask %v, denial %v; want %s", d.Valid(), ask != nil, den, tt.reason)
			}
			if tt.want != "" && !strings.Contains(den.Error(), tt.want) {
				t.Errorf("Error() = %q, want %q", den.Error(), tt.want)
			}
			if !strings.Contains(den.Error(), "see docs/runbook.md#") {
				t.Errorf("Error() = %q lacks its runbook entry", den.Error())
			}
		})
	}

	// ask: parked for the owner, and after approval a Decision.
	askSet := set(t, g("fs", tool, "ask"))
	_, a, den := Decide(askSet, mcpReq(t, tool, cat), private, now)
	if a == nil || den != nil {
		t.Fatalf("ask: %v %v", a, den)
	}
	if d, den := Redecide(askSet, mcpReq(t, tool, cat), private, now); !d.Valid() || den != nil || !d.Approved() {
		t.Errorf("Redecide = %v, %v", d.Valid(), den)
	}
	// Arguments are the server's, but still one strict object.
	bad := Request{Tool: "call_tool", Arguments: json.RawMessage(`{"name":"` + tool + `","arguments":{"a":1,"a":2}}`), MCP: cat}
	if _, _, den := Decide(set(t, auto), bad, private, now); den == nil || den.Reason != InvalidArguments {
		t.Errorf("duplicate keys: %v", den)
	}
}
