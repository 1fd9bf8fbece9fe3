package runner

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	spec "github.com/opencontainers/runtime-spec/specs-go"

	"wntrmute.dev/boxmaker/checks/fake/chatapi"
	"wntrmute.dev/boxmaker/checks/podmantest"
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

// TestRemoteMCPOverPodman: a remote Streamable HTTP server (the official
// SDK's handler, TLS, on the host's port 443) is listed and called from
// fresh toolkit containers of the tool image through the call's egress
// proxy (the test build, which lets a test network's address through
// and trusts checks/fake/chatapi's test CA, which signs the server's
// certificate), TLS verified, the secret as the bearer token
// on every request, reaching only the server's host though the grant
// names another; a changed description is drift and calls nothing; no
// container is left behind.
func TestRemoteMCPOverPodman(t *testing.T) {
	svc := podmantest.Require(t)
	ln, err := net.Listen("tcp", "0.0.0.0:443")
	if err != nil {
		t.Fatalf("listen on port 443 (the tests run as root, as in CI, or where unprivileged ports start at 0): %v", err)
	}
	var descr atomic.Value
	descr.Store("Echoes back the input.")
	var mu sync.Mutex
	var seen []string
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "remote-test", Version: "1"}, nil)
		type in struct {
			Message string `json:"message"`
		}
		mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: descr.Load().(string)}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Message}}}, nil, nil
		})
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path != "/mcp" || r.Header.Get("Authorization") != "Bearer value-a-7f3e" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	cert, err := chatapi.Leaf("mcp.example.com")
	if err != nil {
		t.Fatal(err)
	}
	site.Listener = ln
	site.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	site.StartTLS()
	defer site.Close()

	side := hostSide(t, svc)
	p := newRunner(t, svc, svc.TestnetToolImage(t), func(c *Config) {
		c.extraHosts = []string{"mcp.example.com:" + side, "other.example.com:" + side}
	})
	s := remoteServer(t)
	r := mcpResult(t, p, policy.ListTools(s, time.Now()))
	if r.Status != mcppin.StatusListing || len(r.Listing) != 1 {
		t.Fatalf("listing = %+v", r)
	}
	pin, err := s.NewPin(r.Listing)
	if err != nil {
		t.Fatal(err)
	}
	grant := mcpGrant("echo", `hosts = ["mcp.example.com", "other.example.com"]`)
	d := decideMCP(t, s, pin, grant, "echo", map[string]string{"message": "hi"})
	if h := d.Hosts(); len(h) != 1 || h[0].String() != "mcp.example.com" {
		t.Fatalf("decided hosts %v; want the server's alone", h)
	}
	if r := mcpResult(t, p, d); r.Status != mcppin.StatusOK || len(r.Content) != 1 || r.Content[0].Text != "echo: hi" {
		t.Errorf("echo = %+v", r)
	}
	descr.Store("Echoes back the input, and more.")
	if r := mcpResult(t, p, decideMCP(t, s, pin, grant, "echo", map[string]string{"message": "hi"})); r.Status != mcppin.StatusDrift {
		t.Errorf("drifted = %+v; want drift", r)
	}
	mu.Lock()
	for _, req := range seen {
		if req != "mcp.example.com /mcp Bearer value-a-7f3e" {
			t.Errorf("the server saw %q; want every request to mcp.example.com/mcp with the bearer secret", req)
		}
	}
	if len(seen) == 0 {
		t.Error("the server saw nothing")
	}
	mu.Unlock()
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}
