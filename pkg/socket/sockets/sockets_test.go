package sockets

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func testDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "run")
	if err := MakeDir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestCheckDirRefuses(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := mk("good", 0o700)
	link := filepath.Join(base, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, want string
	}{
		{"root", "/", "is /"},
		{"root unclean", "/tmp/..", "is /"},
		{"relative", "run", "not an absolute path"},
		{"missing", filepath.Join(base, "nope"), "no such file"},
		{"symlink", link, "symbolic link"},
		{"file", file, "not a directory"},
		{"world readable", mk("wr", 0o755), "mode 0755"},
		{"world writable", mk("ww", 0o777), "mode 0777"},
		{"group writable", mk("gw", 0o770), "mode 0770"},
	}
	if os.Geteuid() == 0 {
		other := mk("other", 0o700)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct{ name, dir, want string }{"not owned", other, "owned by uid 65534"})
	} else {
		t.Log("not root: the ownership case needs chown and is not run")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckDir(tt.dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "see docs/runbook.md#socket-dir") {
				t.Errorf("CheckDir(%s) = %v, want %q and a runbook pointer", tt.dir, err, tt.want)
			}
		})
	}
	for _, mode := range []os.FileMode{0o700, 0o750} {
		if err := CheckDir(mk(mode.String(), mode)); err != nil {
			t.Errorf("CheckDir(mode %04o) = %v, want nil", mode, err)
		}
	}
}

// serve starts l.Serve and returns a stop function that waits for it.
func serve(t *testing.T, l *Listener, h Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after cancel, want nil", err)
		}
	})
}

func TestListenAndPeer(t *testing.T) {
	dir := testDir(t)
	l, err := Listen(Config{Dir: dir, Name: "x.sock", Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(l.Path())
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode = %v, %v; want a 0600 socket", fi.Mode(), err)
	}
	got := make(chan Peer, 1)
	serve(t, l, func(ctx context.Context, p Peer, c net.Conn) {
		got <- p
		io.Copy(c, c)
	})
	c, err := Dial(context.Background(), l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hi"))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("echo = %q, %v", buf, err)
	}
	p := <-got
	if int(p.UID()) != os.Geteuid() || int(p.GID()) != os.Getegid() || int(p.PID()) != os.Getpid() {
		t.Errorf("peer = %+v, want this process", p)
	}
	sp, err := PeerOf(c)
	if err != nil || int(sp.UID()) != os.Geteuid() {
		t.Errorf("PeerOf(client) = %+v, %v", sp, err)
	}
}

func TestPeerUIDRefused(t *testing.T) {
	l, err := Listen(Config{Dir: testDir(t), Name: "x.sock", AllowUIDs: []uint32{54321}, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	var called atomic.Bool
	serve(t, l, func(context.Context, Peer, net.Conn) { called.Store(true) })
	c, err := Dial(context.Background(), l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read on a refused connection = %d, %v; want EOF (closed by the listener)", n, err)
	}
	if called.Load() {
		t.Error("the handler ran for a refused peer")
	}
}

func TestPeerGIDRefused(t *testing.T) {
	uid := uint32(os.Geteuid())
	gid := uint32(os.Getegid())
	l, err := Listen(Config{Dir: testDir(t), Name: "x.sock", AllowUIDs: []uint32{uid}, AllowGIDs: []uint32{gid + 1}, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	var called atomic.Bool
	serve(t, l, func(context.Context, Peer, net.Conn) { called.Store(true) })
	c, err := Dial(context.Background(), l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read = %v, want EOF", err)
	}
	if called.Load() {
		t.Error("the handler ran for a peer in the wrong group")
	}
}

func TestStaleAndLiveSockets(t *testing.T) {
	dir := testDir(t)
	path := filepath.Join(dir, "x.sock")
	// A stale socket: bound, then abandoned without unlinking, as after
	// a crash.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	l, err := Listen(Config{Dir: dir, Name: "x.sock", Logger: discard()})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	serve(t, l, func(context.Context, Peer, net.Conn) {})
	// A live one: a second instance must refuse, and leave it alone.
	_, err = Listen(Config{Dir: dir, Name: "x.sock", Logger: discard()})
	if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "see docs/runbook.md#socket-in-use") {
		t.Fatalf("second Listen = %v, want in use", err)
	}
	if c, err := Dial(context.Background(), path); err != nil {
		t.Errorf("the first listener was disturbed: %v", err)
	} else {
		c.Close()
	}
	// Not a socket: never removed.
	file := filepath.Join(dir, "f.sock")
	os.WriteFile(file, []byte("owner's"), 0o600)
	if _, err := Listen(Config{Dir: dir, Name: "f.sock", Logger: discard()}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a file = %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "owner's" {
		t.Error("Listen removed a file that was not a socket")
	}
}

func TestListenConfigRefusals(t *testing.T) {
	dir := testDir(t)
	for _, cfg := range []Config{
		{Dir: dir, Name: "x.sock"},                                 // no logger
		{Dir: dir, Name: "a/b", Logger: discard()},                 // bad name
		{Dir: dir, Name: "x.sock", Mode: 0o666, Logger: discard()}, // world mode
		{Dir: "/", Name: "x.sock", Logger: discard()},              // bad dir
	} {
		if l, err := Listen(cfg); err == nil {
			l.Close()
			t.Errorf("Listen(%+v) succeeded", cfg)
		}
	}
}

func TestReadDeadline(t *testing.T) {
	l, err := Listen(Config{Dir: testDir(t), Name: "x.sock", IdleTimeout: 100 * time.Millisecond, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	serve(t, l, func(_ context.Context, _ Peer, c net.Conn) {
		_, err := c.Read(make([]byte, 1))
		got <- err
	})
	c, err := Dial(context.Background(), l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case err := <-got:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("handler read = %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a silent peer was not cut off by the read deadline")
	}
}

func TestMaxConns(t *testing.T) {
	l, err := Listen(Config{Dir: testDir(t), Name: "x.sock", MaxConns: 1, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	var active, peak atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	serve(t, l, func(context.Context, Peer, net.Conn) {
		n := active.Add(1)
		if n > peak.Load() {
			peak.Store(n)
		}
		entered <- struct{}{}
		<-release
		active.Add(-1)
	})
	c1, _ := Dial(context.Background(), l.Path())
	defer c1.Close()
	<-entered
	c2, _ := Dial(context.Background(), l.Path())
	defer c2.Close()
	select {
	case <-entered:
		t.Fatal("a second connection was served while the cap of 1 was taken")
	case <-time.After(200 * time.Millisecond):
	}
	release <- struct{}{}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting connection was never served")
	}
	close(release)
	if peak.Load() != 1 {
		t.Errorf("peak concurrent handlers = %d, want 1", peak.Load())
	}
}

// flaky fails the first n accepts as an exhausted process would, then
// hands out one end of a real socket pair.
type flaky struct {
	n     int
	conn  *net.UnixConn
	calls int
	done  chan struct{}
}

func (f *flaky) AcceptUnix() (*net.UnixConn, error) {
	f.calls++
	if f.calls <= f.n {
		return nil, &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	if f.conn != nil {
		c := f.conn
		f.conn = nil
		return c, nil
	}
	<-f.done
	return nil, net.ErrClosed
}

func (f *flaky) Close() error {
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	return nil
}

func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conv := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	return conv(fds[0]), conv(fds[1])
}

func TestAcceptExhaustionPausesAndRetries(t *testing.T) {
	a, b := socketPair(t)
	defer b.Close()
	f := &flaky{n: 3, conn: a, done: make(chan struct{})}
	l := &Listener{cfg: Config{MaxConns: 1, IdleTimeout: time.Second, AllowUIDs: []uint32{uint32(os.Geteuid())}, Logger: discard()}, path: "test", ln: f}
	served := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, func(context.Context, Peer, net.Conn) { close(served) }) }()
	select {
	case <-served:
	case err := <-done:
		t.Fatalf("Serve stopped on EMFILE: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the connection after three EMFILE errors was never served")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v after cancel", err)
	}
	if f.calls < 4 {
		t.Errorf("accept was called %d times, want at least 4", f.calls)
	}
}

func TestServeStopsOpenConnections(t *testing.T) {
	l, err := Listen(Config{Dir: testDir(t), Name: "x.sock", Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	entered := make(chan struct{})
	go func() {
		done <- l.Serve(ctx, func(_ context.Context, _ Peer, c net.Conn) {
			close(entered)
			c.Read(make([]byte, 1)) // blocks until the listener closes c
		})
	}()
	c, _ := Dial(context.Background(), l.Path())
	defer c.Close()
	<-entered
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return with a handler blocked in Read")
	}
	if _, err := os.Lstat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file left behind after shutdown: %v", err)
	}
}
