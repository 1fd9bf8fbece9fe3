package grant

import (
	"errors"
	"fmt"

	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
)

// parseMCP parses the constraints of a grant for an MCP tool
// (tool = "mcp.SERVER.TOOL", one tool of one server the owner declared;
// no pattern ever names several):
//
//	paths = ["/home/owner/notes"]  # optional: mounted at the same path, read-only unless writable
//	writable = true                # optional, with paths: mount them read-write
//	hosts = ["api.example.com"]    # optional: the only hosts the server may reach, through the egress proxy
//
// An MCP server's arguments are its own, so brokerd cannot read a path or
// URL out of them as it does for the built-in tools: the grant itself
// says what the container gets. Without hosts the container has no
// network at all; there is no key for "any host", and an empty hosts list
// is refused rather than read as none. The secret is the server
// declaration's (package mcpserver), never a grant's, and an MCP grant is
// never standing.
func (g *Grant) parseMCP(s Spec) error {
	switch {
	case s.Secret != "":
		return fmt.Errorf("%s does not take secret: an MCP server's secret is named in its declaration (mcp/SERVER.toml)", s.Tool)
	case s.Standing != nil:
		return fmt.Errorf("%s does not take standing: a standing approval names one file or one host", s.Tool)
	case s.Paths != nil && len(s.Paths) == 0:
		return fmt.Errorf("%s: paths = [] mounts nothing; leave paths out instead", s.Tool)
	case s.Hosts != nil && len(s.Hosts) == 0:
		return fmt.Errorf("%s: hosts = [] is no network; leave hosts out instead (an MCP grant reaches the network only through the hosts it lists)", s.Tool)
	case s.Writable != nil && len(s.Paths) == 0:
		return errors.New("writable is for paths, and this grant mounts none")
	}
	if err := g.parseConsult(s); err != nil {
		return err
	}
	g.writable = s.Writable != nil && *s.Writable
	var err error
	if s.Paths != nil {
		if g.paths, err = parseList("path", s.Paths, parseGrantPath); err != nil {
			return err
		}
	}
	if s.Hosts != nil {
		if g.hosts, err = parseList("host", s.Hosts, hostrule.ParseName); err != nil {
			return err
		}
	}
	return nil
}
