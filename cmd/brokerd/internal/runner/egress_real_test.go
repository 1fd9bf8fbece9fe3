package runner

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// socksConnect speaks SOCKS5 (RFC 1928) to a call's egress proxy over
// its socket: no auth, then CONNECT to the address given as atyp and
// addr. It returns the reply's code.
func socksConnect(t *testing.T, sock string, atyp byte, addr []byte) byte {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		t.Fatal(err)
	}
	hello := make([]byte, 2)
	if _, err := io.ReadFull(c, hello); err != nil || hello[1] != 0 {
		t.Fatalf("greeting: %v %v", hello, err)
	}
	req := append([]byte{5, 1, 0, atyp}, addr...)
	req = binary.BigEndian.AppendUint16(req, 80)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 2)
	if _, err := io.ReadFull(c, reply); err != nil {
		t.Fatalf("reply: %v", err)
	}
	return reply[1]
}

// TestEgressProxyRefusesLiteralsAndPrivateNames: a call's real egress
// proxy (the release build), spoken to directly over its socket, refuses
// a CONNECT to an IPv4 or IPv6 literal (reply 2, not allowed by ruleset)
// and to a granted name that resolves to 100.64.0.1, for its address;
// the listener those point at sees nothing.
func TestEgressProxyRefusesLiteralsAndPrivateNames(t *testing.T) {
	_, accepted := tripwire(t, "tcp", "0.0.0.0:80")
	svc, p := toolRunner(t, func(c *Config) { c.extraHosts = []string{"cgnat.test:100.64.0.1"} })
	var decisions lockedBuffer
	p.log = slog.New(slog.NewTextHandler(&decisions, nil))
	dir, stop, err := p.startEgress(context.Background(), []string{"cgnat.test"}, 60)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "egress.sock")
	for _, tt := range []struct {
		name string
		atyp byte
		addr []byte
	}{
		{"IPv4 literal", 1, net.ParseIP("10.88.0.1").To4()},
		{"IPv4 loopback literal", 1, net.ParseIP("127.0.0.1").To4()},
		{"IPv6 literal", 4, net.ParseIP("::1").To16()},
		{"IPv4 literal as a name", 3, append([]byte{byte(len("10.88.0.1"))}, "10.88.0.1"...)},
		{"granted name resolving to 100.64.0.1", 3, append([]byte{byte(len("cgnat.test"))}, "cgnat.test"...)},
	} {
		if code := socksConnect(t, sock, tt.atyp, tt.addr); code == 0 {
			t.Errorf("%s: the proxy answered success", tt.name)
		} else if tt.atyp != 3 && code != 2 {
			t.Errorf("%s: reply %d, want 2 (not allowed by ruleset)", tt.name, code)
		}
	}
	stop()
	select {
	case <-accepted:
		t.Error("the listener got a connection through the proxy")
	default:
	}
	if d := decisions.String(); !strings.Contains(d, "100.64.0.1") || !strings.Contains(d, "non-public address") {
		t.Errorf("the proxy's decisions do not show it refused cgnat.test for its address:\n%s", d)
	}
	t.Logf("proxy decisions:\n%s", decisions.String())
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}

// TestEgressRedirectRebound: a redirect to the granted name of the call,
// which by then resolves to 100.64.0.1 (the test rewrites the egress
// container's hosts file, as a rebinding DNS server would answer), is
// refused by the proxy's address check on the new connection, with the
// test build of the proxy, which lets the first request reach the
// host (hostSide).
func TestEgressRedirectRebound(t *testing.T) {
	svc := podmantest.Require(t)
	ln := podmantest.ListenPort(t, 80)
	var p *Podman
	hits := make(chan string, 16)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.URL.Path
		if r.URL.Path != "/rebind" {
			return
		}
		if err := rebind(svc, p, "gw.test", "100.64.0.1"); err != nil {
			t.Error(err)
		}
		// Go's resolver reads /etc/hosts again after 5 s.
		time.Sleep(6 * time.Second)
		http.Redirect(w, r, "http://gw.test/x", http.StatusFound)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	p = newRunner(t, svc, svc.TestnetToolImage(t), func(c *Config) { c.extraHosts = []string{"gw.test:" + hostSide(t, svc)} })
	var decisions lockedBuffer
	p.log = slog.New(slog.NewTextHandler(&decisions, nil))
	out := run(t, p, decide(t, autoGrant("f", "http_fetch", []string{"gw.test"}), "http_fetch", map[string]string{"url": "http://gw.test/rebind"}))
	t.Logf("exit %d, %q", out.Exit, tail(out.Stderr))
	if out.Exit == 0 || !strings.Contains(out.Stderr, "refused") {
		t.Errorf("redirect to a rebound granted name: %+v; want refused", out)
	}
	close(hits)
	var paths []string
	for h := range hits {
		paths = append(paths, h)
	}
	if strings.Join(paths, " ") != "/rebind" {
		t.Errorf("the listener saw %q; want only the first request", paths)
	}
	if d := decisions.String(); !strings.Contains(d, "100.64.0.1") || !strings.Contains(d, "non-public address") {
		t.Errorf("the proxy's decisions do not show the redirect refused for its address:\n%s", d)
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}

// rebind points name at addr in the /etc/hosts of p's running egress
// container (Podman keeps that file on the host and bind-mounts it).
func rebind(svc *podmantest.Service, p *Podman, name, addr string) error {
	ids, err := svc.CLI(nil, "ps", "-q", "--filter", "label="+LabelRole+"=egress", "--filter", "label="+LabelInstance+"="+p.instance)
	if err != nil {
		return err
	}
	for _, id := range strings.Fields(ids) {
		path, err := svc.CLI(nil, "inspect", "--format", "{{.HostsPath}}", id)
		if err != nil {
			return err
		}
		// Podman owns the file as the container's root: rootless, a
		// subordinate id only the service's user namespace can write as.
		path = strings.TrimSpace(path)
		b, err := svc.AsOwner(nil, "cat", path)
		if err != nil {
			return err
		}
		lines := strings.Split(b, "\n")
		for i, l := range lines {
			if f := strings.Fields(l); len(f) > 1 && f[1] == name {
				lines[i] = addr + "\t" + name
			}
		}
		if _, err := svc.AsOwner([]byte(strings.Join(lines, "\n")), "sh", "-c", `cat > "$0"`, path); err != nil {
			return err
		}
	}
	return nil
}
