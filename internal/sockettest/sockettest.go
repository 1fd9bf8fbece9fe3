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
	"testing"

	"wntrmute.dev/boxmaker/pkg/sockets"
)

// Serve listens on dir/name (creating dir, 0700) and serves h until the
// test ends. It returns the socket's path.
func Serve(t testing.TB, dir, name string, h sockets.Handler) string {
	t.Helper()
	if err := sockets.MakeDir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := sockets.Listen(sockets.Config{Dir: dir, Name: name, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
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
