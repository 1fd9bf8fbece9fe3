package runner

import (
	"slices"
	"strings"
	"testing"
	"time"

	spec "github.com/opencontainers/runtime-spec/specs-go"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
)

const remoteURL = "https://mcp.example.com/mcp"

func remoteServer(t testing.TB) mcpserver.Server {
	t.Helper()
	s, err := mcpserver.NewServer("test", mcpserver.Spec{URL: remoteURL, Secret: "TOKEN_A"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRemoteMCPSpec: a remote server's call is a plain tool container of
// the tool image running /bin/toolkit mcp, with no toolkit bound, the
// egress directory mounted, and the URL (never a command) in its input.
func TestRemoteMCPSpec(t *testing.T) {
	c := checked(t)
	s := remoteServer(t)
	d := policy.ListTools(s, time.Now())
	tool := c.toolSpec("inst", d, "/work/egress-1", "")
	if tool.Image != testImage || !slices.Equal(tool.Command, []string{"/bin/toolkit", "mcp"}) {
		t.Errorf("image %q command %q; want the tool image's own toolkit", tool.Image, tool.Command)
	}
	if slices.ContainsFunc(tool.Mounts, func(m spec.Mount) bool { return strings.HasPrefix(m.Destination, ToolkitMount) }) {
		t.Errorf("a toolkit is bound: %+v", tool.Mounts)
	}
	if !slices.ContainsFunc(tool.Mounts, func(m spec.Mount) bool { return m.Destination == EgressMount && slices.Contains(m.Options, "ro") }) {
		t.Errorf("no egress directory: %+v", tool.Mounts)
	}
	raw, err := mcpArgs(d)
	if err != nil {
		t.Fatal(err)
	}
	call, err := mcppin.ParseCall(raw)
	if err != nil || call.URL != remoteURL || call.Command != nil || !call.Listing() {
		t.Errorf("mcpArgs = %s (%+v, %v)", raw, call, err)
	}
}
