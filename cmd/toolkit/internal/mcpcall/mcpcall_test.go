package mcpcall

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/egress"
	"wntrmute.dev/boxmaker/cmd/toolkit/internal/nettest"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
)

// server builds checks/mcptest/server once per test binary.
func server(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	cmd := exec.Command("go", "build", "-o", bin, "wntrmute.dev/boxmaker/checks/mcptest/server")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test server: %v\n%s", err, out)
	}
	return bin
}

func do(t *testing.T, call mcppin.Call) mcppin.Result {
	t.Helper()
	var out bytes.Buffer
	if err := Run(context.Background(), Env{Stdout: &out, Path: DefaultPath}, call); err != nil {
		t.Fatal(err)
	}
	r, err := mcppin.ParseResult(out.Bytes())
	if err != nil {
		t.Fatalf("ParseResult(%.300s): %v", out.String(), err)
	}
	return r
}

// pin lists the server in mode and returns the pinned sums of tool.
func pin(t *testing.T, bin, mode, tool string) mcppin.Pin {
	t.Helper()
	r := do(t, mcppin.Call{Server: "test", Command: []string{bin, mode}})
	if r.Status != mcppin.StatusListing || len(r.Listing) == 0 {
		t.Fatalf("listing = %+v", r)
	}
	p, err := mcppin.NewPin("test", "sha256:"+strings.Repeat("0", 64), r.Listing)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func call(p mcppin.Pin, bin, mode, tool, args string) mcppin.Call {
	pt, _ := p.Lookup(tool)
	return mcppin.Call{Server: "test", Command: []string{bin, mode}, Tool: tool, Arguments: json.RawMessage(args),
		ToolSHA256: pt.SHA256, ListingSHA256: p.ListingSHA256}
}

// TestDriftRefused: a server pinned in one mode and called in another
// (echo's description changed, its schema widened, echo renamed, a tool
// added) is refused with drift and its live listing, and nothing is
// called; the pinned mode calls through.
func TestDriftRefused(t *testing.T) {
	bin := server(t)
	p := pin(t, bin, "pinned", "echo")
	if r := do(t, call(p, bin, "pinned", "echo", `{"message":"hi"}`)); r.Status != mcppin.StatusOK || len(r.Content) != 1 || r.Content[0].Text != "echo: hi" {
		t.Errorf("pinned call = %+v", r)
	}
	for _, tt := range []struct{ mode, want string }{
		{"description", "description or input schema differs"},
		{"schema", "description or input schema differs"},
		{"rename", "no longer lists tool \"echo\""},
		{"added", "another tool"},
	} {
		r := do(t, call(p, bin, tt.mode, "echo", `{"message":"hi"}`))
		if r.Status != mcppin.StatusDrift || !strings.Contains(r.Detail, tt.want) || len(r.Listing) == 0 || len(r.Content) != 0 {
			t.Errorf("%s: %+v, want drift %q with the live listing", tt.mode, r, tt.want)
		}
	}
}

// TestContentIsCappedAndDescribed: text past MaxText is cut and said to
// be; an image is described, never inlined; a tool error is reported as
// one; a server that is not there fails with a detail.
func TestContentIsCappedAndDescribed(t *testing.T) {
	bin := server(t)
	p := pin(t, bin, "pinned", "big")
	r := do(t, call(p, bin, "pinned", "big", `{"n":1048576}`))
	if r.Status != mcppin.StatusOK || !r.Truncated || len(r.Content[0].Text) != mcppin.MaxText {
		t.Errorf("big = status %s truncated %v len %d", r.Status, r.Truncated, len(r.Content[0].Text))
	}
	r = do(t, call(p, bin, "pinned", "image", `{}`))
	if len(r.Content) != 2 || r.Content[1].Type != "described" || !strings.Contains(r.Content[1].Text, "image/png") || strings.Contains(r.Content[1].Text, "PNG") {
		t.Errorf("image = %+v", r)
	}
	r = do(t, call(p, bin, "pinned", "read", `{"path":"/nonexistent/x"}`))
	if r.Status != mcppin.StatusToolError {
		t.Errorf("read missing = %+v, want tool_error", r)
	}
	r = do(t, mcppin.Call{Server: "test", Command: []string{"/nonexistent/server"}})
	if r.Status != mcppin.StatusFailed || r.Detail == "" {
		t.Errorf("missing server = %+v", r)
	}
}

// TestEgressBridge: with the call's egress proxy present, the server
// reaches a granted host over HTTPS through HTTPS_PROXY (the bridge turns
// its CONNECT into the proxy's SOCKS5); a host the grant does not name is
// refused by the proxy, and plain http:// has no way out.
func TestEgressBridge(t *testing.T) {
	bin := server(t)
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "from the granted host") }))
	defer site.Close()
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := hostrule.ParseName("api.example.com")
	d := &nettest.Dialer{To: map[string]string{"93.184.216.34:443": site.Listener.Addr().String(), "93.184.216.35:443": site.Listener.Addr().String()}}
	r := nettest.Resolver{"api.example.com": nettest.Addrs("93.184.216.34"), "other.example.com": nettest.Addrs("93.184.216.35")}
	p := &egress.Proxy{Hosts: []hostrule.Name{host}, Resolver: r, Dialer: d, Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(done) }()
	defer func() { cancel(); <-done }()

	pin := pin(t, bin, "pinned", "get")
	get := func(url string) mcppin.Result {
		var out bytes.Buffer
		if err := Run(context.Background(), Env{Stdout: &out, Path: DefaultPath, EgressSocket: sock}, call(pin, bin, "pinned", "get", `{"url":"`+url+`"}`)); err != nil {
			t.Fatal(err)
		}
		res, err := mcppin.ParseResult(out.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := get("https://api.example.com/"); r.Content[0].Text != "get: from the granted host" {
		t.Errorf("granted host = %+v", r)
	}
	if r := get("https://other.example.com/"); !strings.Contains(r.Content[0].Text, "get failed") {
		t.Errorf("another host = %+v, want refused", r)
	}
	if r := get("http://api.example.com/"); !strings.Contains(r.Content[0].Text, "get failed") {
		t.Errorf("plain http = %+v, want no way out", r)
	}
	if dialed := d.Dialed(); len(dialed) != 1 || dialed[0] != "93.184.216.34:443" {
		t.Errorf("the proxy dialled %v, want the granted host once", dialed)
	}
}

// inMemory serves s over the SDK's in-memory transports and runs one
// listing session against it.
func inMemory(t *testing.T, s *mcp.Server) mcppin.Result {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	return session(ctx, ct, mcppin.Call{Server: "test"}, &capped{max: maxStderr})
}

// TestClientOffersNothing: the server sees no capability at all on any
// request (the SDK's default client offers roots), whether the client
// states them in initialize (older servers) or in each request's _meta
// (the 2026-07-28 protocol the SDK's own server speaks).
func TestClientOffersNothing(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			var p struct {
				Capabilities json.RawMessage            `json:"capabilities"`
				Meta         map[string]json.RawMessage `json:"_meta"`
			}
			b, _ := json.Marshal(req.GetParams())
			json.Unmarshal(b, &p)
			mu.Lock()
			defer mu.Unlock()
			if p.Capabilities != nil {
				seen = append(seen, method+" "+string(p.Capabilities))
			}
			if c, ok := p.Meta["io.modelcontextprotocol/clientCapabilities"]; ok {
				seen = append(seen, method+" "+string(c))
			}
			return next(ctx, method, req)
		}
	})
	if r := inMemory(t, s); r.Status != mcppin.StatusListing {
		t.Fatalf("listing = %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the server saw no client capabilities at all")
	}
	for _, c := range seen {
		if _, caps, _ := strings.Cut(c, " "); caps != "{}" {
			t.Errorf("the client's capabilities: %s; want {}", c)
		}
	}
}

// TestEmptyPagesForeverRefused: a server whose tools/list answers an
// empty page with a next cursor, forever, is refused at its first such
// page instead of holding the call until its time limit.
func TestEmptyPagesForeverRefused(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	var pages atomic.Int64
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			pages.Add(1)
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{}, NextCursor: "again"}, nil
		}
	})
	r := inMemory(t, s)
	if r.Status != mcppin.StatusFailed || !strings.Contains(r.Detail, "empty page") || pages.Load() != 1 {
		t.Errorf("listing = %+v after %d pages; want failed at the first empty page", r, pages.Load())
	}
}
