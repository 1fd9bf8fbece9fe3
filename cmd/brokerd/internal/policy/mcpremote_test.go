package policy

import (
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
)

// remoteCatalog declares remote server search at
// https://mcp.example.com/mcp (secret SEARCH_TOKEN), pinned with one
// tool, query.
func remoteCatalog(t *testing.T) *mcpserver.Catalog {
	t.Helper()
	s, err := mcpserver.NewServer("search", mcpserver.Spec{URL: "https://mcp.example.com/mcp", Secret: "SEARCH_TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := mcppin.NewListing([]mcppin.Listed{{Name: "query", Description: "Searches.", InputSchema: []byte(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	pin, err := s.NewPin(tools)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mcpserver.NewCatalog(mcpserver.Entry{Server: s, Pin: &pin})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMCPRemoteDecisions: a remote server's call is allowed only when the
// winning grant's hosts name the server's host, and then reaches that
// host alone (not the grant's other hosts), with the declaration's
// secret and none of the grant's paths; a grant without hosts, or with other hosts only, is refused
// no_grant with its own runbook entry, and never reaches the runner.
func TestMCPRemoteDecisions(t *testing.T) {
	cat := remoteCatalog(t)
	const tool = "mcp.search.query"
	good := g("s", tool, "auto", "hosts", `["api.example.com", "mcp.example.com"]`, "paths", `["/home/owner/notes"]`)
	d, ask, den := Decide(set(t, good), mcpReq(t, tool, cat), private, now)
	if den != nil || ask != nil || !d.Valid() {
		t.Fatalf("remote with its host granted: %v %v", ask, den)
	}
	if h := d.Hosts(); len(h) != 1 || h[0].String() != "mcp.example.com" {
		t.Errorf("Hosts() = %v; want the server's host alone", h)
	}
	if ms := d.Mounts(); len(ms) != 0 {
		t.Errorf("Mounts() = %v; want none for a remote server", ms)
	}
	if m, _ := d.MCP(); !m.Server.Remote() || m.Server.URL() != "https://mcp.example.com/mcp" || d.Secret() != "SEARCH_TOKEN" {
		t.Errorf("MCP() = %+v, secret %q", m, d.Secret())
	}
	for _, tt := range []struct {
		name  string
		grant string
	}{
		{"no hosts", g("s", tool, "auto")},
		{"other hosts", g("s", tool, "auto", "hosts", `["api.example.com"]`)},
		{"a parent domain", g("s", tool, "auto", "hosts", `["example.com"]`)},
		{"ask without hosts", g("s", tool, "ask")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, ask, den := Decide(set(t, tt.grant), mcpReq(t, tool, cat), private, now)
			if d.Valid() || ask != nil || den == nil || den.Reason != NoGrant {
				t.Fatalf("Decide = valid %v, ask %v, denial %v; want no_grant", d.Valid(), ask != nil, den)
			}
			msg := den.Error()
			for _, want := range []string{"mcp.example.com", "is remote", "see docs/runbook.md#mcp-remote-host"} {
				if !strings.Contains(msg, want) {
					t.Errorf("Error() = %q; want %q", msg, want)
				}
			}
			if r := den.Record(); r.Reason != NoGrant || !strings.Contains(r.Detail, "mcp.example.com") || len(r.Matched) != 1 {
				t.Errorf("Record() = %+v", r)
			}
		})
	}
	// A grant that says its results are trusted does not make a remote
	// server's so: its answer comes from another machine.
	trusting := g("s", tool, "auto", "hosts", `["mcp.example.com"]`, "untrusted", "false")
	if d, _, den := Decide(set(t, trusting), mcpReq(t, tool, cat), private, now); den != nil || !d.Valid() || !d.Untrusted() {
		t.Errorf("remote under untrusted = false: valid %v, untrusted %v, denial %v; want untrusted", d.Valid(), d.Untrusted(), den)
	}
	if !d.Untrusted() {
		t.Errorf("remote under the default grant: untrusted %v", d.Untrusted())
	}
	// A deny grant still wins before the host is looked at.
	if _, _, den := Decide(set(t, good, g("no", tool, "deny")), mcpReq(t, tool, cat), private, now); den == nil || den.Reason != DeniedByGrant {
		t.Errorf("deny beside a good grant: %v", den)
	}
}

// TestListToolsRemote: listing a remote server for bxctl mcp pin reaches
// its host alone, with its secret; a server run from its image is listed
// with no network and no secret.
func TestListToolsRemote(t *testing.T) {
	e, _ := remoteCatalog(t).Lookup("search")
	d := ListTools(e.Server, now)
	if h := d.Hosts(); !d.Valid() || len(h) != 1 || h[0].String() != "mcp.example.com" || d.Secret() != "SEARCH_TOKEN" || len(d.Mounts()) != 0 {
		t.Errorf("ListTools(remote): valid %v hosts %v secret %q mounts %v", d.Valid(), d.Hosts(), d.Secret(), d.Mounts())
	}
	f, _ := catalog(t).Lookup("files")
	if d := ListTools(f.Server, now); len(d.Hosts()) != 0 || d.Secret() != "" {
		t.Errorf("ListTools(stdio): hosts %v secret %q; want none", d.Hosts(), d.Secret())
	}
}
