package runner

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/mcptest"
	"wntrmute.dev/boxmaker/checks/podmantest"
)

// TestMCPServerReachesGrantedHost: an MCP grant's hosts are the server's
// way out, over real Podman: the server's own HTTPS client, told
// HTTPS_PROXY by the toolkit, reaches the granted name through the
// call's egress proxy (the test build, which lets a test network's
// address through; TLS end to end, to a server on port 80); a name the
// grant does not list is refused, and the listener sees only the granted
// call.
func TestMCPServerReachesGrantedHost(t *testing.T) {
	svc := podmantest.Require(t)
	ln := podmantest.ListenPort(t, 80)
	hits := make(chan string, 8)
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Host
		io.WriteString(w, "from the granted host")
	}))
	site.Listener = ln
	site.StartTLS()
	defer site.Close()
	side := hostSide(t, svc)
	p := newRunner(t, svc, svc.TestnetToolImage(t), func(c *Config) {
		c.extraHosts = []string{"gw.test:" + side, "other.test:" + side}
	})
	s := mcpServer(t, mcptest.ServerImage(t, svc), "pinned")
	pin := pinned(t, p, s)
	grant := mcpGrant("get", `hosts = ["gw.test"]`)
	r := mcpResult(t, p, decideMCP(t, s, pin, grant, "get", map[string]string{"url": "https://gw.test:80/"}))
	if len(r.Content) != 1 || r.Content[0].Text != "get: from the granted host" {
		t.Errorf("granted host = %+v", r)
	}
	r = mcpResult(t, p, decideMCP(t, s, pin, grant, "get", map[string]string{"url": "https://other.test:80/"}))
	if len(r.Content) != 1 || !strings.Contains(r.Content[0].Text, "get failed") {
		t.Errorf("a host the grant does not list = %+v, want refused", r)
	}
	close(hits)
	var seen []string
	for h := range hits {
		seen = append(seen, h)
	}
	if strings.Join(seen, " ") != "gw.test:80" {
		t.Errorf("the listener saw %q; want the granted call only", seen)
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}
