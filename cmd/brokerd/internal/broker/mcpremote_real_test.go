package broker

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"wntrmute.dev/boxmaker/checks/fake/chatapi"
	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
)

const remoteToken = "mcp-token-4d1a9e"

// TestRemoteMCPThroughBrokerdOverPodman is a remote server's whole path
// over real Podman: brokerd lists it for the owner (admin.sock) through a
// fresh toolkit container and its egress proxy; the pin, bound to its
// URL, is written; call_tool runs an auto grant's call, labelled with the
// grant's class and untrusted; a result carrying the bearer token has it
// redacted; a changed description is refused with mcp-drift and leaves a
// re-pin proposal bound to the URL; the audit log holds the result with
// the pin's sum; the server saw every request, for its host (the grant
// names another too, which policy drops: TestMCPRemoteDecisions), with
// the bearer token. (brokerd's runner tests listen on port 80; this package's
// real-network tests on 443, so the two packages can run at once.)
func TestRemoteMCPThroughBrokerdOverPodman(t *testing.T) {
	svc := podmantest.Require(t)
	image := svc.TestnetToolImage(t)
	ln := podmantest.ListenPort(t, 443)
	var descr atomic.Value
	descr.Store("Echoes back the input.")
	var mu sync.Mutex
	var auth []string
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "remote-test", Version: "1"}, nil)
		type in struct {
			Message string `json:"message"`
		}
		mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: descr.Load().(string)}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Message}}}, nil, nil
		})
		// whoami answers with the token it was sent: brokerd must redact it.
		mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Says who called."}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you sent " + req.Extra.Header.Get("Authorization")}}}, nil, nil
		})
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Host+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+remoteToken {
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

	keyFile := filepath.Join(t.TempDir(), "mcp-token")
	os.WriteFile(keyFile, []byte(remoteToken+"\n"), 0o600)
	grants := `[[grant]]
id = "echo-remote"
tool = "mcp.search.echo"
hosts = ["mcp.example.com", "other.example.com"]
result_class = "secret"
max_taint = "secret"
mode = "auto"

[[grant]]
id = "whoami-remote"
tool = "mcp.search.whoami"
hosts = ["mcp.example.com"]
max_taint = "secret"
mode = "auto"
`
	h := startTuned(t, grants, func(c *brokerd.Config) {
		r, _ := brokerd.Runner{PodmanSocket: svc.Socket, ToolImage: image}.Check()
		c.Runner = &r
		ref, _ := secret.ParseRef("file:" + keyFile)
		c.Secrets = map[string]secret.Ref{"MCP_TOKEN": ref}
		os.MkdirAll(c.MCPDir(), 0o700)
		os.WriteFile(filepath.Join(c.MCPDir(), "search.toml"), []byte("url = \"https://mcp.example.com/mcp\"\nsecret = \"MCP_TOKEN\"\n"), 0o600)
	}, func(r *runner.Config) { runner.TestOnlyNetwork(r, []string{"mcp.example.com:10.88.0.1"}) })

	a := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	a.Send(&wire.MCPList{Server: "search"})
	l, ok := a.Recv().(*wire.MCPListing)
	if !ok || l.URL != "https://mcp.example.com/mcp" || l.Image != "" || len(l.Tools) != 2 {
		t.Fatalf("mcp_list = %#v", l)
	}
	var tools []mcppin.Tool
	for _, x := range l.Tools {
		tools = append(tools, mcppin.Tool{Name: x.Name, Description: x.Description, InputSchema: x.InputSchema, SHA256: x.SHA256})
	}
	pin, err := mcppin.NewRemotePin("search", l.URL, tools)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := pin.Encode()
	os.WriteFile(filepath.Join(h.cfg.MCPDir(), "search.pin.json"), text, 0o600)

	echo := `{"name":"mcp.search.echo","arguments":{"message":"hi"}}`
	r := result(t, h.call(t, "call_tool", echo))
	if r.Status != wire.StatusRan || r.Output != "echo: hi" || r.Class.String() != "secret" || !r.Untrusted {
		t.Errorf("remote echo = %+v", r)
	}
	r = result(t, h.call(t, "call_tool", `{"name":"mcp.search.whoami","arguments":{}}`))
	if r.Status != wire.StatusRan || strings.Contains(r.Output, remoteToken) || !strings.Contains(r.Output, "you sent Bearer ") {
		t.Errorf("whoami = %+v; want the token redacted", r)
	}
	descr.Store("Echoes back the input, and now something else.")
	r = result(t, h.call(t, "call_tool", echo))
	if r.Status != wire.StatusDenied || !strings.Contains(r.Output, "mcp-drift") {
		t.Errorf("drifted = %+v", r)
	}
	prop, err := os.ReadFile(filepath.Join(h.cfg.StateDir, "proposals", "mcp-search.pin.json"))
	if p, perr := mcppin.ParsePin(prop); err != nil || perr != nil || p.URL != "https://mcp.example.com/mcp" || p.ListingSHA256 == pin.ListingSHA256 {
		t.Errorf("re-pin proposal = %+v, %v, %v", p, err, perr)
	}
	h.stop()
	var pins []string
	audit.Records(filepath.Join(h.cfg.StateDir, "broker", "audit"), func(rec audit.Record, _ string) error {
		if res, ok := rec.(*audit.Result); ok {
			pins = append(pins, res.MCPPin)
		}
		return nil
	})
	if len(pins) != 3 || pins[0] != pin.ListingSHA256 || pins[2] != pin.ListingSHA256 {
		t.Errorf("results' pins = %v, want 3 naming %s", pins, pin.ListingSHA256)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range auth {
		if v != "mcp.example.com Bearer "+remoteToken {
			t.Errorf("the server saw %q; want every request to mcp.example.com with the bearer token", v)
		}
	}
	if len(auth) == 0 {
		t.Error("the server saw nothing")
	}
}
