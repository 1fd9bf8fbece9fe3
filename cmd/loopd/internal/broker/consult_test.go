package broker

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// slowConsult says consult_pending until expires, then answers after
// delay.
func slowConsult(t *testing.T, expires time.Time, delay time.Duration) string {
	t.Helper()
	return sockettest.Serve(t, filepath.Join(t.TempDir(), "broker"), &wire.Broker, rpc.NewServer(&wire.Broker, slog.New(slog.DiscardHandler),
		rpc.Stream(func(ctx context.Context, _ sockets.Peer, c *rpc.Conn, r *wire.ToolRequest) error {
			c.Send(&wire.ConsultPending{ID: 5, Expires: expires.UTC().Format(time.RFC3339)})
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil
			}
			c.Send(&wire.ToolResult{Status: wire.StatusRan, Output: "the remote answer", Label: dataclass.Label{Class: dataclass.Private, Untrusted: true}})
			<-ctx.Done()
			return nil
		})).Serve)
}

// TestClientWaitsForConsult: after consult_pending the client waits past
// its usual deadline, up to the consult's expiry, and no approval is
// reported; past the expiry plus the deadline it gives up.
func TestClientWaitsForConsult(t *testing.T) {
	path := slowConsult(t, time.Now().Add(3*time.Second), 1200*time.Millisecond)
	called := false
	o := (&Client{Path: path, Timeout: 400 * time.Millisecond}).Call(context.Background(), req, func(int64) { called = true })
	if o.Status != wire.StatusRan || o.Output != "the remote answer" || !o.Untrusted || called {
		t.Errorf("Call = %+v, approval reported %v", o, called)
	}
	path = slowConsult(t, time.Now().Add(-time.Second), 5*time.Second)
	start := time.Now()
	o = (&Client{Path: path, Timeout: 400 * time.Millisecond}).Call(context.Background(), req, func(int64) {})
	if o.Status != wire.StatusDenied || !strings.Contains(o.Output, "brokerd did not answer") || time.Since(start) > 3*time.Second {
		t.Errorf("an expired consult: %+v after %v", o, time.Since(start))
	}
}
