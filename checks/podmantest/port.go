package podmantest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PortWait bounds how long [ListenPort] waits for another test process
// on this host to let go of the port: one test holds it for its own run
// (seconds to a few minutes under load), never for a whole package.
const PortWait = 20 * time.Minute

// ListenPort listens on 0.0.0.0:port, a port the tool containers reach
// by its fixed number (80 for http_fetch's and an MCP server's traffic
// through the egress proxy, 443 for consult's and a remote MCP server's),
// so only one test on the whole host can hold it at a time. Two test
// processes (two packages of one `go test ./...`, or a second `make
// gate` beside `make test`, as docs/test-times.md measures) take turns
// through a lock file in the temporary directory instead of failing with
// "address already in use": the lock is held from before the listen
// until after the close, in t.Cleanup. Without root, where port 80 is
// root's, it skips the test unless CI is set, as the Nix sandbox's build
// user has no such port.
func ListenPort(t testing.TB, port int) net.Listener {
	t.Helper()
	unlock, err := lockPort(port, PortWait)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:"+strconv.Itoa(port))
	if err != nil {
		unlock()
		if os.Getenv("CI") == "" && errors.Is(err, os.ErrPermission) {
			t.Skipf("did not run: %v (needs root or unprivileged ports from 0)", err)
		}
		t.Fatalf("listen on port %d (the tests run as root, as in CI, or where unprivileged ports start at 0, as in the VM test host): %v", port, err)
	}
	t.Cleanup(func() {
		ln.Close()
		unlock()
	})
	return ln
}

// lockPort takes the host-wide lock of port, waiting at most wait, and
// writes this process's id into the lock file for the next waiter's
// message. The lock is an flock, so a process that dies lets go of it.
func lockPort(port int, wait time.Duration) (unlock func(), err error) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("boxmaker-test-port-%d.lock", port))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("port %d's test lock: %v", port, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			holder, _ := os.ReadFile(path)
			f.Close()
			return nil, fmt.Errorf("port %d's test lock %s: %v (held by process %s after %s); another test run on this host holds the port", port, path, err, strings.TrimSpace(string(holder)), wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
