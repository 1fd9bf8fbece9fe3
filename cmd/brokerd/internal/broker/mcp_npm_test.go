package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/mcptest"
	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
)

// declareCommand writes mcp/NAME.toml for image and command.
func declareCommand(t *testing.T, dir, name, image string, command []string) {
	t.Helper()
	os.MkdirAll(dir, 0o700)
	q := make([]string, len(command))
	for i, a := range command {
		q[i] = fmt.Sprintf("%q", a)
	}
	decl := "image = \"" + image + "\"\ncommand = [" + strings.Join(q, ", ") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, name+".toml"), []byte(decl), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestThirdPartyMCPServers: the npm registry's server-everything and
// server-filesystem, in an image of the machine's Node
// (images/mcp-test-image), are pinned through admin.sock, found through
// find_tools and called through call_tool over real Podman, with an auto
// and an ask grant; the filesystem server, declared with "/" as its
// allowed directory, sees only the path its grant mounts.
func TestThirdPartyMCPServers(t *testing.T) {
	svc := podmantest.Require(t)
	toolImage := svc.ToolImage(t)
	npm := mcptest.NPMImage(t, svc)
	granted, other := t.TempDir(), t.TempDir()
	os.Chmod(granted, 0o755)
	os.Chmod(other, 0o755)
	os.WriteFile(filepath.Join(granted, "notes.txt"), []byte("granted notes"), 0o644)
	os.WriteFile(filepath.Join(other, "private.txt"), []byte("never shown"), 0o644)
	grants := `
[[grant]]
id = "echo-auto"
tool = "mcp.everything.echo"
max_taint = "secret"
mode = "auto"

[[grant]]
id = "files-ask"
tool = "mcp.files.read_text_file"
paths = ["` + granted + `"]
max_taint = "secret"
result_class = "private"
mode = "ask"

[[grant]]
id = "files-list"
tool = "mcp.files.list_directory"
paths = ["` + granted + `"]
max_taint = "secret"
mode = "auto"
`
	h := startWith(t, grants, func(c *brokerd.Config) {
		r, _ := brokerd.Runner{PodmanSocket: svc.Socket, ToolImage: toolImage}.Check()
		c.Runner = &r
		declareCommand(t, c.MCPDir(), "everything", npm, mcptest.EverythingCommand)
		declareCommand(t, c.MCPDir(), "files", npm, append(mcptest.FilesystemCommand, "/"))
	})
	everything := pinServer(t, h, "everything")
	files := pinServer(t, h, "files")
	for _, want := range []struct {
		pin  []string
		tool string
	}{{toolNames(everything.Tools), "echo"}, {toolNames(files.Tools), "read_text_file"}, {toolNames(files.Tools), "list_directory"}} {
		if !strings.Contains(strings.Join(want.pin, ","), want.tool) {
			t.Fatalf("pinned tools %v lack %s", want.pin, want.tool)
		}
	}
	c := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	c.Send(&wire.FindTools{})
	found, _ := c.Recv().(*wire.FoundTools)
	var names []string
	for _, f := range found.Tools {
		names = append(names, f.Name)
	}
	if all := strings.Join(names, ","); !strings.Contains(all, "mcp.everything.echo") || !strings.Contains(all, "mcp.files.read_text_file") {
		t.Errorf("find_tools = %s", all)
	}

	r := result(t, h.call(t, "call_tool", `{"name":"mcp.everything.echo","arguments":{"message":"hello from boxmaker"}}`))
	if r.Status != wire.StatusRan || !strings.Contains(r.Output, "hello from boxmaker") || !r.Untrusted {
		t.Errorf("everything echo (auto) = %+v", r)
	}

	ask := h.call(t, "call_tool", fmt.Sprintf(`{"name":"mcp.files.read_text_file","arguments":{"path":%q}}`, filepath.Join(granted, "notes.txt")))
	p, ok := ask.Recv().(*wire.ToolPending)
	if !ok {
		t.Fatal("read_text_file: want tool_pending")
	}
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.GetApproval{ID: p.ID})
	admin.Send(&wire.Approve{ID: p.ID, Code: admin.Recv().(*wire.Approval).Call.Code})
	admin.Recv()
	if r := result(t, ask); r.Status != wire.StatusRan || !strings.Contains(r.Output, "granted notes") || r.Class.String() != "private" {
		t.Errorf("files read (ask, approved) = %+v", r)
	}

	// The server allows "/", but only the granted path is in its
	// container: the other directory, and the host's /etc, are not there.
	r = result(t, h.call(t, "call_tool", fmt.Sprintf(`{"name":"mcp.files.list_directory","arguments":{"path":%q}}`, other)))
	if strings.Contains(r.Output, "private.txt") {
		t.Errorf("the filesystem server listed an ungranted directory: %+v", r)
	}
	r = result(t, h.call(t, "call_tool", `{"name":"mcp.files.list_directory","arguments":{"path":"/"}}`))
	if strings.Contains(r.Output, "home") && !strings.HasPrefix(granted, "/home") || strings.Contains(r.Output, "boot") || strings.Contains(r.Output, "var") {
		t.Errorf("the filesystem server sees more than its image and grant at /: %+v", r)
	}
}

func toolNames(ts []mcppin.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}
