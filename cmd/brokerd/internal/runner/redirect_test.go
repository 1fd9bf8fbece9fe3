package runner

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// TestEgressRedirects: with the test build of the proxy (which may reach
// the host's podman bridge, where this test serves HTTP), a granted host
// answers through the proxy; a redirect to another name, even one the
// grant lists (here resolving to a CGNAT address), or one no grant lists,
// is refused, because every new connection passes the proxy's checks
// again and a call's proxy allows only the host of the URL that was
// decided. A redirect back to the same name gets the address check of
// TestEgressProxyRefusesPrivateNames.
func TestEgressRedirects(t *testing.T) {
	svc := podmantest.Require(t)
	ln := podmantest.ListenPort(t, 80)
	hits := make(chan string, 16)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Host + r.URL.Path
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("hello through the proxy\n"))
		case "/to-cgnat":
			http.Redirect(w, r, "http://cgnat.test/x", http.StatusFound)
		case "/to-other":
			http.Redirect(w, r, "http://other.test/x", http.StatusFound)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	host := hostSide(t, svc)
	p := newRunner(t, svc, svc.TestnetToolImage(t), func(c *Config) {
		c.extraHosts = []string{"gw.test:" + host, "cgnat.test:100.64.0.1", "other.test:" + host}
	})
	var decisions lockedBuffer
	p.log = slog.New(slog.NewTextHandler(&decisions, nil))
	grant := autoGrant("f", "http_fetch", []string{"gw.test", "cgnat.test"})
	fetch := func(path string) Output {
		return run(t, p, decide(t, grant, "http_fetch", map[string]string{"url": "http://gw.test" + path}))
	}
	if out := fetch("/ok"); out.Exit != 0 || !strings.Contains(out.Stdout, "hello through the proxy") {
		t.Fatalf("the allowed side does not work, so the refusals below prove nothing: %+v\n%s", out, decisions.String())
	}
	for _, path := range []string{"/to-cgnat", "/to-other"} {
		out := fetch(path)
		t.Logf("%s: exit %d, %q", path, out.Exit, tail(out.Stderr))
		if out.Exit == 0 || !strings.Contains(out.Stderr, "refused") {
			t.Errorf("redirect %s: %+v; want refused", path, out)
		}
	}
	close(hits)
	for h := range hits {
		if strings.HasSuffix(h, "/x") {
			t.Errorf("a redirect target was reached: %s", h)
		}
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
	d := decisions.String()
	if !strings.Contains(d, `egress refused\",\"host\":\"cgnat.test`) || !strings.Contains(d, `egress refused\",\"host\":\"other.test`) {
		t.Errorf("the proxy's decisions lack the refusals:\n%s", d)
	}
}
