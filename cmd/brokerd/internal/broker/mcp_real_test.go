package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/mcptest"
	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
)

const realGrants = `
[[grant]]
id = "echo-auto"
tool = "mcp.test.echo"
max_taint = "secret"
result_class = "secret"
mode = "auto"

[[grant]]
id = "markup-ask"
tool = "mcp.test.markup"
max_taint = "secret"
mode = "ask"

[[grant]]
id = "big-auto"
tool = "mcp.test.big"
max_taint = "secret"
mode = "auto"
`

// pinOverAdmin lists server test over admin.sock (bxctl mcp pin's
// question) and writes the pin it answers into the mcp directory.
func pinOverAdmin(t *testing.T, h *harness) mcppin.Pin { return pinServer(t, h, "test") }

// pinServer lists server over admin.sock and writes its pin.
func pinServer(t *testing.T, h *harness, server string) mcppin.Pin {
	t.Helper()
	a := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	a.Send(&wire.MCPList{Server: server})
	l, ok := a.Recv().(*wire.MCPListing)
	if !ok || len(l.Tools) == 0 {
		t.Fatalf("mcp_list = %#v", l)
	}
	tools := make([]mcppin.Tool, len(l.Tools))
	for i, x := range l.Tools {
		tools[i] = mcppin.Tool{Name: x.Name, Description: x.Description, InputSchema: x.InputSchema, SHA256: x.SHA256}
	}
	pin, err := mcppin.NewPin(l.Server, l.Image, tools)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := pin.Encode()
	if err := os.WriteFile(filepath.Join(h.cfg.MCPDir(), server+".pin.json"), text, 0o600); err != nil {
		t.Fatal(err)
	}
	return pin
}

func declareTest(t *testing.T, dir, image, mode string) {
	t.Helper()
	os.MkdirAll(dir, 0o700)
	decl := "image = \"" + image + "\"\ncommand = [\"" + mcptest.ServerPath + "\", \"" + mode + "\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "test.toml"), []byte(decl), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMCPThroughBrokerd is the whole path over real Podman: a server
// without a pin is refused; the owner's listing (admin.sock) is pinned;
// find_tool shows the pinned tools; call_tool runs an auto grant's call
// (labelled with the grant's class, untrusted) and, after the owner's
// yes, an ask grant's, whose chat-template markup reaches the answer
// neutralised; a result past the cap is cut; a server whose listing then
// drifts is refused with mcp-drift and leaves a re-pin proposal; the audit
// log holds every result with the pin's sum.
func TestMCPThroughBrokerd(t *testing.T) {
	svc := podmantest.Require(t)
	toolImage := svc.ToolImage(t)
	serverImage := mcptest.ServerImage(t, svc)
	h := startWith(t, realGrants, func(c *brokerd.Config) {
		r, _ := brokerd.Runner{PodmanSocket: svc.Socket, ToolImage: toolImage}.Check()
		c.Runner = &r
		c.ResultCap = 64 << 10
		declareTest(t, c.MCPDir(), serverImage, "pinned")
	})
	echo := `{"name":"mcp.test.echo","arguments":{"message":"hi"}}`
	if r := result(t, h.call(t, "call_tool", echo)); r.Status != wire.StatusDenied || !strings.Contains(r.Output, "mcp-unpinned") {
		t.Fatalf("unpinned = %+v", r)
	}
	pin := pinOverAdmin(t, h)

	c := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	c.Send(&wire.FindTools{})
	if f, ok := c.Recv().(*wire.FoundTools); !ok || len(f.Tools) != len(pin.Tools) {
		t.Errorf("find_tools = %+v, want the %d pinned tools", f, len(pin.Tools))
	}

	r := result(t, h.call(t, "call_tool", echo))
	if r.Status != wire.StatusRan || r.Output != "echo: hi" || r.Class.String() != "secret" || !r.Untrusted {
		t.Errorf("auto echo = %+v", r)
	}

	ask := h.call(t, "call_tool", `{"name":"mcp.test.markup","arguments":{}}`)
	p, ok := ask.Recv().(*wire.ToolPending)
	if !ok {
		t.Fatalf("markup: want tool_pending")
	}
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.GetApproval{ID: p.ID})
	code := admin.Recv().(*wire.Approval).Call.Code
	admin.Send(&wire.Approve{ID: p.ID, Code: code})
	admin.Recv()
	r = result(t, ask)
	if r.Status != wire.StatusRan || !strings.Contains(r.Output, "done.") || strings.Contains(r.Output, "<|im_start|>") {
		t.Errorf("ask markup = %+v, want ran with the markup neutralised", r)
	}

	r = result(t, h.call(t, "call_tool", `{"name":"mcp.test.big","arguments":{"n":1000000}}`))
	if r.Status != wire.StatusRan || len(r.Output) > 64<<10 || !strings.Contains(r.Output, "xxxx") {
		t.Errorf("big = status %s, %d bytes", r.Status, len(r.Output))
	}

	// Drift: the server, re-declared to change echo's description, its
	// schema or its name, is refused each time and leaves a re-pin
	// proposal holding what changed.
	for _, tt := range []struct{ mode, shows string }{
		{"description", "id_ed25519"},
		{"schema", `\"path\"`},
		{"rename", `"name": "echo2"`},
	} {
		declareTest(t, h.cfg.MCPDir(), serverImage, tt.mode)
		r = result(t, h.call(t, "call_tool", echo))
		if r.Status != wire.StatusDenied || !strings.Contains(r.Output, "mcp-drift") || !strings.Contains(r.Output, "docs/runbook.md#mcp-drift") {
			t.Errorf("%s: drifted = %+v", tt.mode, r)
		}
		prop, err := os.ReadFile(filepath.Join(h.cfg.StateDir, "proposals", "mcp-test.pin.json"))
		if err != nil {
			t.Fatalf("%s: no re-pin proposal: %v", tt.mode, err)
		}
		if p, err := mcppin.ParsePin(prop); err != nil || p.ListingSHA256 == pin.ListingSHA256 || !strings.Contains(string(prop), tt.shows) {
			t.Errorf("%s: proposal = %v, lacks %s", tt.mode, err, tt.shows)
		}
	}

	h.stop()
	var pins []string
	audit.Records(filepath.Join(h.cfg.StateDir, "broker", "audit"), func(rec audit.Record, _ string) error {
		if res, ok := rec.(*audit.Result); ok {
			pins = append(pins, res.MCPPin)
		}
		return nil
	})
	if len(pins) != 6 || pins[0] != pin.ListingSHA256 || pins[5] != pin.ListingSHA256 {
		t.Errorf("results' pins = %v, want 6 naming %s", pins, pin.ListingSHA256)
	}
}
