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

	"wntrmute.dev/boxmaker/pkg/frame"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/strict"
)

// Serve listens on dir/name (creating dir, 0700) and serves h until the
// test ends. It returns the socket's path.
func Serve(t testing.TB, dir, name string, h sockets.Handler) string {
	t.Helper()
	require.NoError(t, sockets.MakeDir(dir, 0o700))
	ln, err := sockets.Listen(sockets.Config{Dir: dir, Name: name, Logger: slog.New(slog.DiscardHandler)})
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

// Conn is a test's client end of a framed socket: it sends with one union
// and reads with another (the same for a symmetric protocol), failing the
// test on any error, with a generous read deadline so a hung peer fails
// the test instead of hanging it.
type Conn struct {
	T   testing.TB
	C   net.Conn
	Max int                           // the socket's frame cap
	Out *strict.Union[strict.Variant] // what the client sends
	In  *strict.Union[strict.Variant] // what the client reads
}

// Dial connects to path; the connection closes when the test ends.
func Dial(t testing.TB, path string, max int, out, in *strict.Union[strict.Variant]) *Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &Conn{T: t, C: c, Max: max, Out: out, In: in}
}

// Send writes v as one frame.
func (c *Conn) Send(v strict.Variant) {
	c.T.Helper()
	b, err := c.Out.Encode(v)
	if err == nil {
		err = frame.Write(c.C, b, c.Max)
	}
	if err != nil {
		c.T.Fatalf("send %s: %v", v.Tag(), err)
	}
}

// Recv reads and strictly decodes one frame.
func (c *Conn) Recv() strict.Variant {
	c.T.Helper()
	c.C.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := frame.Read(c.C, c.Max)
	require.NoError(c.T, err, "read")
	v, err := c.In.Decode(b)
	if err != nil {
		c.T.Fatalf("decode %s: %v", b, err)
	}
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
