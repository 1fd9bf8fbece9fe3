package policy

import (
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// MCPUnpinned denies an MCP call whose server brokerd cannot check: not
// declared, declared without a pin for its image, not listing the tool in
// its pin, or an invalid mcp directory (rule 11).
const MCPUnpinned Reason = "mcp_unpinned"

// MCPCall is what an MCP tool's Decision carries to the runner: the
// server's declaration, the pinned tool and the pin's listing sum, which
// the live listing inside the container must match.
type MCPCall struct {
	Server        mcpserver.Server
	Tool          mcppin.Tool
	ListingSHA256 string
}

// MCP returns the MCP call of an MCP tool's Decision.
func (d Decision) MCP() (MCPCall, bool) {
	m := d.get().mcp
	if m == nil {
		return MCPCall{}, false
	}
	return *m, true
}

// matchMCP applies rule 11: the grants first, exactly as for a built-in
// tool (no grant is no_grant, a deny grant denies), and only then the
// pin, so that an unpinned server is refused before the owner is ever
// asked, and a denied call never reads the mcp directory's state.
func matchMCP(grants []grant.Grant, a toolargs.MCP, cat *mcpserver.Catalog, sess Session, now time.Time) (*verdict, *Denial) {
	v, d := match(grants, a, sess, now)
	if d != nil {
		return nil, d
	}
	server, tool, _ := toolset.SplitMCP(a.Name)
	unpinned := func(why string) (*verdict, *Denial) {
		return nil, &Denial{Reason: MCPUnpinned, Detail: oneLine(why), Matched: v.matched}
	}
	if !cat.Valid() {
		return unpinned("the mcp directory is invalid")
	}
	e, ok := cat.Lookup(server)
	switch {
	case !ok:
		return unpinned("no server " + server + " is declared")
	case e.Pin == nil:
		return unpinned("server " + server + " is not pinned: " + e.Why)
	}
	t, ok := e.Pin.Lookup(tool)
	if !ok {
		return unpinned("server " + server + "'s pin lists no tool " + tool)
	}
	if e.Server.Remote() {
		// A remote server is reached through the call's egress proxy, so
		// the winning grant must name its host explicitly; the container
		// then reaches that host alone, not every host the grant lists.
		host := e.Server.Host()
		if !hostrule.Allowed(host, v.hosts) {
			return nil, &Denial{Reason: NoGrant, Matched: v.matched, Detail: oneLine("server " + server +
				" is remote, at " + e.Server.URL() + ", and the winning grant " + v.winner.ID + "'s hosts do not name " + host.String())}
		}
		v.hosts = []hostrule.Name{host}
		// A remote server's answer is text from another machine, as a
		// consulted model's is (package grant refuses a trusted consult
		// grant): no grant can make it trusted, not even one copied from
		// a local server's.
		v.untrusted = true
		// Nothing of a remote server runs here to read a path: the
		// toolkit sends none, so a grant's paths are never mounted.
		v.mounts = nil
	}
	v.mcp = &MCPCall{Server: e.Server, Tool: t, ListingSHA256: e.Pin.ListingSHA256}
	v.secret = e.Server.Secret()
	return v, nil
}

// remoteHostError is the text of a remote MCP server's call refused
// because its grant does not name the server's host.
func remoteHostError(d *Denial) (string, bool) {
	if d.Reason != NoGrant || d.Detail == "" || !toolset.IsMCP(d.Tool) {
		return "", false
	}
	return fmt.Sprintf("%q denied: %s, so it is never started; a remote MCP server's grant must list its host in hosts; see docs/runbook.md#mcp-remote-host", d.Tool, d.Detail), true
}

// ListTools is the authority to list a declared server's tools once, for
// the owner's `bxctl mcp pin` (admin.sock, which only the owner reaches):
// the server's container with no network, no mount and no secret, whose
// toolkit calls nothing; for a remote server, a toolkit container whose
// only network is an egress proxy to the server's host, with the
// declaration's secret. It is not a tool call: no grant decides it and
// no session's taint rises with it; its result goes to the owner's
// terminal, escaped, never to the model.
func ListTools(s mcpserver.Server, now time.Time) Decision {
	if !s.Valid() {
		return Decision{}
	}
	v := verdict{tool: toolset.MCPName(s.Name(), "tools-list"), mode: grant.Auto,
		class: dataclass.Private, untrusted: true, session: effective(Session{Taint: dataclass.Private}), at: now,
		mcp: &MCPCall{Server: s}}
	if s.Remote() {
		// A remote server is listed where it is: through an egress proxy
		// to its host alone, with its secret (sent to that URL only), or a
		// server that asks for a token could never be pinned.
		v.hosts, v.secret = []hostrule.Name{s.Host()}, s.Secret()
	}
	return Decision{&decision{verdict: v}}
}

// Listing reports whether d is a [ListTools] authority.
func (m MCPCall) Listing() bool { return m.Tool.Name == "" }
