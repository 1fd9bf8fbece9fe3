// Package sockets is how every Boxmaker daemon listens on and dials its
// Unix sockets.
//
// Invariants, for every listener made by [Listen]:
//   - the socket sits in a directory that passes [CheckDir] (owned by the
//     daemon's user, 0700 or 0750, not "/", not a symbolic link);
//   - a socket file already there is removed only when nothing answers on
//     it, and Listen refuses to start when something does;
//   - the socket's mode is 0600, or 0660 where a pair of roles shares a
//     group (the default in a setgid directory, whose group it inherits);
//   - every accepted connection's peer is checked with SO_PEERCRED before
//     any handler sees it, and a handler can only learn who its peer is
//     through a [Peer], which nothing outside this package can build;
//   - every read and write on an accepted connection has a deadline;
//   - at most MaxConns connections are served at once;
//   - running out of file descriptors or memory pauses accepting and
//     retries; it never stops the daemon.
package sockets

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Defaults for a [Config] that leaves a field zero.
const (
	DefaultMaxConns    = 16
	DefaultIdleTimeout = 2 * time.Minute
)

// Config describes one listening socket.
type Config struct {
	Dir  string      // the socket directory; see CheckDir
	Name string      // the socket's file name, e.g. "broker.sock"
	Mode fs.FileMode // 0600 (default) or 0660

	// AllowUIDs lists the peer uids accepted; empty means only this
	// daemon's own effective uid. If AllowGIDs is not empty, the peer's
	// gid must also be in it.
	AllowUIDs []uint32
	AllowGIDs []uint32

	MaxConns    int           // concurrent connections; DefaultMaxConns if 0
	IdleTimeout time.Duration // deadline for each read and write; DefaultIdleTimeout if 0
	Logger      *slog.Logger  // required
}

// Peer is the authenticated identity of a connection's other end, read
// from the kernel at accept time. Its fields are unexported so that only
// this package can make one: a handler that takes a Peer was reached
// through the check.
type Peer struct {
	uid, gid uint32
	pid      int32
}

// UID is the peer's effective user id.
func (p Peer) UID() uint32 { return p.uid }

// GID is the peer's effective group id.
func (p Peer) GID() uint32 { return p.gid }

// PID is the peer's process id at connect time (for logs only: pids are
// reused, so it is never an authority).
func (p Peer) PID() int32 { return p.pid }

// Handler serves one accepted, checked connection. The connection is
// closed when the handler returns. ctx is cancelled when the listener
// shuts down.
type Handler func(ctx context.Context, peer Peer, conn net.Conn)

// Listener is a listening socket made by [Listen].
type Listener struct {
	cfg  Config
	path string
	ln   acceptor
}

// acceptor is the part of *net.UnixListener that Serve uses, so that tests
// can make Accept fail the way an exhausted process does.
type acceptor interface {
	AcceptUnix() (*net.UnixConn, error)
	Close() error
}

// Listen checks the directory, clears a stale socket and listens.
func Listen(cfg Config) (*Listener, error) {
	if cfg.Logger == nil {
		return nil, errors.New("listen: no logger")
	}
	if cfg.Name == "" || strings.ContainsRune(cfg.Name, '/') {
		return nil, fmt.Errorf("listen: bad socket name %q", cfg.Name)
	}
	if cfg.Mode == 0 {
		cfg.Mode = 0o600
		// A setgid directory is a pair's (package layout): the socket
		// inherits the client's group, which must be able to connect.
		if fi, err := os.Lstat(cfg.Dir); err == nil && fi.Mode()&fs.ModeSetgid != 0 {
			cfg.Mode = 0o660
		}
	}
	if cfg.Mode != 0o600 && cfg.Mode != 0o660 {
		return nil, fmt.Errorf("listen: socket mode %04o is not 0600 or 0660", cfg.Mode)
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if len(cfg.AllowUIDs) == 0 {
		cfg.AllowUIDs = []uint32{uint32(os.Geteuid())}
	}
	if err := CheckDir(cfg.Dir); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	path := filepath.Join(cfg.Dir, cfg.Name)
	if err := clearStale(path); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, cfg.Mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return &Listener{cfg: cfg, path: path, ln: ln}, nil
}

// clearStale removes a socket file that nothing answers on. A live socket
// means another instance is running; anything that is not a socket is the
// owner's file and is never removed.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; see docs/runbook.md#socket-in-use", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s is in use by a running process; see docs/runbook.md#socket-in-use", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s exists and cannot be probed (%v); see docs/runbook.md#socket-in-use", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

// Path is the socket's full path.
func (l *Listener) Path() string { return l.path }

// Close stops listening and removes the socket file.
func (l *Listener) Close() error { return l.ln.Close() }

func (l *Listener) allowed(p Peer) bool {
	if !slices.Contains(l.cfg.AllowUIDs, p.uid) {
		return false
	}
	return len(l.cfg.AllowGIDs) == 0 || slices.Contains(l.cfg.AllowGIDs, p.gid)
}

// Dial connects to the socket at path. The connection has no deadlines;
// callers set their own (a turn may legitimately wait a long time).
func Dial(ctx context.Context, path string) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	return c.(*net.UnixConn), nil
}

// PeerOf reads the credentials of the other end of c; a client uses it to
// check that the daemon it reached runs as the user it expects.
func PeerOf(c *net.UnixConn) (Peer, error) { return peerOf(c) }
