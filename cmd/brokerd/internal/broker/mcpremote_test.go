package broker

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
)

const remoteGrants = `
[[grant]]
id = "query-hosts"
tool = "mcp.search.query"
max_taint = "secret"
mode = "auto"
hosts = ["mcp.example.com"]

[[grant]]
id = "fetch-no-hosts"
tool = "mcp.search.fetch"
max_taint = "secret"
mode = "auto"
`

func remoteListing(t *testing.T) []mcppin.Tool {
	t.Helper()
	tools, err := mcppin.NewListing([]mcppin.Listed{
		{Name: "query", Description: "Searches.", InputSchema: []byte(`{"type":"object"}`)},
		{Name: "fetch", Description: "Fetches.", InputSchema: []byte(`{"type":"object"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// declareRemote writes remote server search, at
// https://mcp.example.com/mcp, pinned with query and fetch.
func declareRemote(t *testing.T, grantsDir string) {
	t.Helper()
	dir := mcpserver.DirBeside(grantsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	pin, err := mcppin.NewRemotePin("search", "https://mcp.example.com/mcp", remoteListing(t))
	if err != nil {
		t.Fatal(err)
	}
	text, _ := pin.Encode()
	for name, body := range map[string]string{"search.toml": "url = \"https://mcp.example.com/mcp\"\n", "search.pin.json": string(text)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRemoteMCPThroughBrokerd: a remote server's pinned tools are found
// from the pin; a call whose grant names the server's host reaches the
// runner (here the refusing one), one whose grant names no host is
// denied before it, saying why and where to look, and the audit log
// holds that denial as no_grant with the host in its detail.
func TestRemoteMCPThroughBrokerd(t *testing.T) {
	h := startWith(t, remoteGrants, func(c *brokerd.Config) { declareRemote(t, c.GrantsDir) })
	c := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	c.Send(&wire.FindTools{})
	if f, ok := c.Recv().(*wire.FoundTools); !ok || len(f.Tools) != 2 || f.Tools[0].Name != "mcp.search.fetch" {
		t.Errorf("find_tools = %+v", f)
	}
	r := result(t, h.call(t, "call_tool", `{"name":"mcp.search.query","arguments":{"q":"x"}}`))
	if r.Status != wire.StatusFailed || !strings.Contains(r.Output, "tool containers are not configured") {
		t.Errorf("granted host = %+v; want it to reach the runner", r)
	}
	r = result(t, h.call(t, "call_tool", `{"name":"mcp.search.fetch","arguments":{}}`))
	if r.Status != wire.StatusDenied || !strings.Contains(r.Output, "is remote") || !strings.Contains(r.Output, "docs/runbook.md#mcp-remote-host") {
		t.Errorf("no hosts = %+v; want denied with mcp-remote-host", r)
	}
	h.stop()
	var got []string
	err := audit.Records(filepath.Join(h.cfg.StateDir, "broker", "audit"), func(r audit.Record, _ string) error {
		if d, ok := r.(*audit.Decision); ok {
			got = append(got, d.Record.Tool+":"+string(d.Record.Outcome)+":"+string(d.Record.Reason)+":"+d.Record.Detail)
		}
		return nil
	})
	if err != nil || len(got) != 2 || got[0] != "mcp.search.query:allowed::" ||
		!strings.HasPrefix(got[1], "mcp.search.fetch:denied:no_grant:server search is remote") || !strings.Contains(got[1], "mcp.example.com") {
		t.Errorf("audit decisions = %q, %v", got, err)
	}
}

// TestRemoteRepinProposalIsBoundToTheURL: a remote server's drift leaves
// a proposal pinned to its URL, which bxctl mcp pin --proposal accepts
// for the same declaration.
func TestRemoteRepinProposalIsBoundToTheURL(t *testing.T) {
	state := t.TempDir()
	b := &Broker{cfg: brokerd.Config{StateDir: state}, log: slog.New(slog.DiscardHandler)}
	s, err := mcpserver.NewServer("search", mcpserver.Spec{URL: "https://mcp.example.com/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	note := b.proposeRepin(policy.MCPCall{Server: s}, remoteListing(t))
	if !strings.Contains(note, "bxctl mcp pin search --proposal") {
		t.Errorf("note = %q", note)
	}
	text, err := os.ReadFile(filepath.Join(state, "proposals", "mcp-search.pin.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcppin.ParsePin(text)
	if err != nil || p.URL != "https://mcp.example.com/mcp" || p.Image != "" {
		t.Errorf("proposal = %+v, %v; want bound to the url", p, err)
	}
}
