// Package sockettest runs a real listener from package sockets for a test:
// a peer of the code under test (a fake brokerd, memoryd or loopd) on a
// Unix socket in a fresh 0700 directory, with the same peer checks and
// deadlines as a daemon. It is for tests only.
//
// Invariant: the listener and every connection it served are closed, and
// its handlers have returned, when the test's cleanup runs.
package sockettest

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Serve listens on socket s in dir (creating dir, 0700) and serves h
// until the test ends. It returns the socket's path.
func Serve(t testing.TB, dir string, s *wire.Socket, h sockets.Handler) string {
	t.Helper()
	require.NoError(t, sockets.MakeDir(dir, 0o700))
	ln, err := rpc.Listen(s, sockets.Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		ln.Serve(ctx, h)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Path()
}

// Conn is a test's end of a conversation on a socket (package rpc's
// Conn), failing the test on any error, with a generous read deadline so
// a hung peer fails the test instead of hanging it.
type Conn struct {
	T testing.TB
	C *rpc.Conn
}

// Dial connects to socket s at path as its client; the connection closes
// when the test ends.
func Dial(t testing.TB, s *wire.Socket, path string) *Conn {
	t.Helper()
	c, err := rpc.Dial(context.Background(), s, path)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &Conn{T: t, C: c}
}

// Accept is the server's end of connection c on socket s, for a test
// double that plays the server by hand.
func Accept(t testing.TB, s *wire.Socket, c net.Conn) *Conn {
	return &Conn{T: t, C: rpc.Accept(s, c)}
}

// Send writes v as one frame.
func (c *Conn) Send(v strict.Variant) {
	c.T.Helper()
	if err := c.C.Send(v); err != nil {
		c.T.Fatalf("send %s: %v", v.Tag(), err)
	}
}

// Recv reads and strictly decodes one frame.
func (c *Conn) Recv() strict.Variant {
	c.T.Helper()
	c.C.SetDeadline(time.Now().Add(20 * time.Second))
	v, err := c.C.Recv()
	require.NoError(c.T, err, "read")
	return v
}

// Start runs a daemon's run function in the background until the socket
// at ready appears (failing the test if run returns first or the socket
// never comes), and returns stop, which cancels run and fails the test if
// it returned an error. The test's cleanup stops it if the test did not.
func Start(t testing.TB, what, ready string, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	for i := 0; ; i++ {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("%s did not start: %v", what, err)
		default:
		}
		if i > 500 {
			cancel()
			t.Fatalf("%s did not start: no %s after 5 s", what, ready)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Run = %v", what, err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return stop
}
