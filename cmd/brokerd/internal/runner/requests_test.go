package runner

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestCallRequests: a call with a mount makes the requests its checks
// need and no more (docs/runner.md, "Where the time goes"): one create,
// the verify's and the process ID's inspects, one attach, one start, the
// exit's inspect (again a few times if conmon has not yet written the
// code, with a wait then) and one remove, on the runner's shared
// connection (no ping after the first call) and the attach's own socket.
// Counted by a transparent relay in front of the real service's socket.
func TestCallRequests(t *testing.T) {
	svc, p := toolRunner(t, nil)
	relay := newRequestRelay(t, svc.Socket)
	p.url = "unix://" + relay.path
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("hello\n"), 0o644)
	d := decide(t, autoGrant("r", "read_file", []string{dir}), "read_file", map[string]string{"path": dir + "/f.txt"})
	for i := range 3 {
		relay.reset()
		if out := run(t, p, d); out.Stdout != "hello\n" {
			t.Fatalf("call %d: %+v", i, out)
		}
		settled(t, p) // the removal runs after the answer
		conns, reqs := relay.counts()
		want := map[string]int{"create": 1, "attach": 1, "start": 1, "DELETE": 1}
		if i == 0 {
			want["_ping"] = 1
		}
		for k, n := range want {
			if reqs[k] != n {
				t.Errorf("call %d: %d %s requests, want %d (all: %v)", i, reqs[k], k, n, reqs)
			}
		}
		rechecks := 0
		for pause := exitPause; pause <= exitPauseMax; pause *= 2 {
			rechecks++
		}
		exits := reqs["json"] - 2
		// (The wait, asked beside the second look, may be cancelled
		// before it is sent.)
		// (A wait that answers first is confirmed by one more inspect.)
		if exits < 1 || exits > 2+rechecks || reqs["wait"] > min(exits-1, 1) || len(reqs) > len(want)+2 {
			t.Errorf("call %d: requests %v; want 3 to %d inspects, and a wait only after the first exit inspect missed", i, reqs, 4+rechecks)
		}
		if i > 0 && conns > 2 {
			t.Errorf("call %d opened %d connections; want the attach's and at most one for the wait", i, conns)
		}
	}
}

// TestSharedConnectionSurvivesDroppedSockets: the runner's one
// connection outlives its sockets: after the service closed every one of
// them (as a socket-activated service that exits when idle, or restarts,
// does), the next call dials anew and runs.
func TestSharedConnectionSurvivesDroppedSockets(t *testing.T) {
	svc, p := toolRunner(t, nil)
	relay := newRequestRelay(t, svc.Socket)
	p.url = "unix://" + relay.path
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("hello\n"), 0o644)
	d := decide(t, autoGrant("r", "read_file", []string{dir}), "read_file", map[string]string{"path": dir + "/f.txt"})
	for i := range 3 {
		if out := run(t, p, d); out.Stdout != "hello\n" {
			t.Fatalf("call %d: %+v", i, out)
		}
		settled(t, p) // the removal after the answer uses the sockets too
		relay.drop()
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}

// requestRelay relays connections to a socket and counts them and the
// requests on them, by the last path element (or DELETE).
type requestRelay struct {
	path  string
	mu    sync.Mutex
	conns int
	reqs  map[string]int
	open  []net.Conn // every relayed connection, both sides
}

var requestLine = regexp.MustCompile(`(GET|POST|DELETE) /v[0-9.]+/libpod/([^ ?]*)[^ ]* HTTP/1\.1\r\n`)

func newRequestRelay(t *testing.T, target string) *requestRelay {
	t.Helper()
	r := &requestRelay{path: filepath.Join(t.TempDir(), "relay.sock"), reqs: map[string]int{}}
	ln, err := net.Listen("unix", r.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns++
			r.open = append(r.open, c, up)
			r.mu.Unlock()
			go func() { io.Copy(c, up); c.Close() }()
			go r.forward(c, up.(*net.UnixConn))
		}
	}()
	return r
}

// forward copies the client's side, counting request lines. A request
// line split across two reads would go uncounted and fail the test
// loudly, never pass it.
func (r *requestRelay) forward(c net.Conn, up *net.UnixConn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		for _, m := range requestLine.FindAllSubmatch(buf[:n], -1) {
			key := string(m[2])
			if string(m[1]) == "DELETE" {
				key = "DELETE"
			} else if i := strings.LastIndexByte(key, '/'); i >= 0 {
				key = key[i+1:]
			}
			r.mu.Lock()
			r.reqs[key]++
			r.mu.Unlock()
		}
		up.Write(buf[:n])
		if err != nil {
			up.CloseWrite()
			return
		}
	}
}

// drop closes every connection relayed so far, as a restarting service
// closes its idle ones.
func (r *requestRelay) drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.open {
		c.Close()
	}
	r.open = nil
}

func (r *requestRelay) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns, r.reqs = 0, map[string]int{}
}

func (r *requestRelay) counts() (int, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]int, len(r.reqs))
	for k, v := range r.reqs {
		m[k] = v
	}
	return r.conns, m
}
