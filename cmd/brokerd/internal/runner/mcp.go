package runner

import (
	"encoding/json"
	"errors"

	"github.com/containers/podman/v5/pkg/specgen"
	spec "github.com/opencontainers/runtime-spec/specs-go"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
)

// An MCP call's container is the server's own image, by ID and never
// pulled, with the toolkit bound read-only at ToolkitMount/toolkit and
// command `ToolkitMount/toolkit mcp`. The toolkit file is the tool
// image's own /bin/toolkit, copied out of a never-started container of
// that image (by ID) once per runner (toolkit.go): it comes from the
// image brokerd already trusts, not from a path any config names, and
// Podman's image volumes cannot be mounted in a container with a user
// namespace of its own (the overlay mount is refused). The toolkit
// starts the server's command as its child and speaks MCP to it over stdio (cmd/toolkit's mcpcall). It
// is hardened exactly as a tool container (hardened, toolSpec): no
// network unless the grant lists hosts, only the grant's paths, the
// declaration's one secret on stdin, the same limits and seccomp profile.
//
// A remote (Streamable HTTP) server's call is a plain tool container of
// brokerd's tool image running `/bin/toolkit mcp`, whose only network is
// the call's egress proxy to the server's host (policy narrows the
// grant's hosts to it); no toolkit is copied or bound.
const ToolkitMount = "/.boxmaker"

// ErrMCPImage is the error of an MCP server whose image is not loaded.
var ErrMCPImage = errors.New("the MCP server's image named in its declaration is not in Podman's storage, and it is never pulled; see docs/runbook.md#mcp-image-missing")

// mcpCommand is an MCP container's argv: the toolkit bound in the
// server's image, or the tool image's own for a remote server.
func mcpCommand(bound bool) []string {
	if !bound {
		return toolCommand("mcp")
	}
	return []string{ToolkitMount + "/toolkit", "mcp"}
}

// mcpSpec turns a tool container's spec into an MCP call's: the server's
// image and the toolkit file bound read-only.
func (c Config) mcpSpec(s *specgen.SpecGenerator, d policy.Decision, toolkit string) {
	m, _ := d.MCP()
	if m.Server.Remote() {
		// A remote server runs nowhere here: the toolkit of brokerd's own
		// tool image speaks Streamable HTTP to its URL through the call's
		// egress proxy (the spec's image and hardening stand).
		s.Command = mcpCommand(false)
		return
	}
	s.Image = m.Server.Image()
	s.Command = mcpCommand(true)
	s.Mounts = append(s.Mounts, spec.Mount{Type: "bind", Source: toolkit, Destination: ToolkitMount + "/toolkit",
		Options: []string{"bind", "ro", "nosuid", "nodev", "private"}})
	// The server's image may name an entrypoint, a user, a working
	// directory or environment: the runner's command and user stand, the
	// entrypoint is cleared, and the toolkit builds the server's
	// environment from nothing.
	s.Entrypoint = []string{}
	s.WorkDir = "/tmp"
}

// mcpArgs are the container's input: the server's command, the tool, the
// model's arguments and the pinned sums; or, for a listing, the server
// alone.
func mcpArgs(d policy.Decision) ([]byte, error) {
	m, _ := d.MCP()
	call := mcppin.Call{Server: m.Server.Name(), Command: m.Server.Command(), URL: m.Server.URL()}
	if m.Listing() {
		return json.Marshal(call)
	}
	raw, err := d.Args().MarshalJSON()
	if err != nil {
		return nil, err
	}
	call.Tool, call.Arguments, call.ToolSHA256, call.ListingSHA256 = m.Tool.Name, raw, m.Tool.SHA256, m.ListingSHA256
	return json.Marshal(call)
}
