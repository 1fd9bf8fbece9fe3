package runner

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

// cutAfterCreate is a Unix socket in front of Podman's that forwards each
// request, but for a container create it lets Podman finish, then calls
// onCreate and drops Podman's answer: the create happened, the caller
// never learns the ID.
func cutAfterCreate(t *testing.T, upstream string, onCreate func()) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cut.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("unix", upstream)
				if err != nil {
					return
				}
				defer up.Close()
				cr, ur := bufio.NewReader(c), bufio.NewReader(up)
				for {
					req, err := http.ReadRequest(cr)
					if err != nil {
						return
					}
					if err := req.Write(up); err != nil {
						return
					}
					resp, err := http.ReadResponse(ur, req)
					if err != nil {
						return
					}
					if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/containers/create") {
						resp.Body.Close()
						onCreate()
						return
					}
					err = resp.Write(c)
					resp.Body.Close()
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return sock
}

// TestCancelledCreateLeavesNothing: a call cancelled while Podman creates
// its container (Podman finishes, brokerd never gets the ID) still
// removes that container, found by the call's nonce label (review 8).
func TestCancelledCreateLeavesNothing(t *testing.T) {
	svc := podmantest.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock := cutAfterCreate(t, svc.Socket, cancel)
	p := newRunner(t, svc, svc.StubImage(t), func(c *Config) { c.PodmanSocket = sock })
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), []byte("hi"), 0o644)
	d := decide(t, autoGrant("r", "read_file", []string{dir}), "read_file", map[string]string{"path": dir + "/x"})
	if _, err := p.Run(ctx, d); !errors.Is(err, ErrPodman) {
		t.Fatalf("Run with its create cut off = %v, want ErrPodman", err)
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}

// TestNilLoggerIsDiscard: a runner made without a logger logs nowhere
// instead of panicking on its first log line (review 10).
func TestNilLoggerIsDiscard(t *testing.T) {
	p, err := New(Config{Runner: brokerd.Runner{PodmanSocket: "/nonexistent/p.sock", ToolImage: testImage}}, "i", t.TempDir(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.log.Info("egress proxy", "decision", "{}")
}
