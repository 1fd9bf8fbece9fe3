package rpc_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/socket/frame"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// serve runs socket s's server with routes in a fresh directory.
func serve(t *testing.T, s *wire.Socket, routes ...rpc.Route) string {
	t.Helper()
	return sockettest.Serve(t, filepath.Join(t.TempDir(), "d"), s, rpc.NewServer(s, slog.New(slog.DiscardHandler), routes...).Serve)
}

func stopDone(_ context.Context, _ sockets.Peer, st *wire.Stop) strict.Variant {
	return &wire.StopDone{Session: st.Session, Stopped: true}
}

func TestCallInterimThenFinal(t *testing.T) {
	path := serve(t, &wire.Loop, rpc.On(stopDone), rpc.Stream(func(_ context.Context, _ sockets.Peer, c *rpc.Conn, s *wire.Send) error {
		c.Send(&wire.Accepted{Session: s.Session})
		c.Send(&wire.Working{Session: s.Session})
		return c.Send(&wire.Answer{Session: s.Session, Text: "hi"})
	}))
	var interim []string
	v, err := rpc.Call(t.Context(), &wire.Loop, path, &wire.Send{Session: "s", Text: "x"}, func(v strict.Variant) error {
		interim = append(interim, v.Tag())
		return nil
	})
	if a, ok := v.(*wire.Answer); err != nil || !ok || a.Text != "hi" || strings.Join(interim, ",") != "accepted,working" {
		t.Errorf("Call = %#v, %v after %v; want the answer after accepted, working", v, err, interim)
	}
	// One connection, two exchanges: loop.sock takes one after another.
	c, err := rpc.Dial(t.Context(), &wire.Loop, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 2 {
		if d, err := rpc.Expect[*wire.StopDone](c, &wire.Stop{Session: "s"}, nil); err != nil || !d.Stopped {
			t.Errorf("Expect(stop) = %v, %v", d, err)
		}
	}
	// No interim callback: an interim answer is unexpected.
	if _, err := rpc.Call(t.Context(), &wire.Loop, path, &wire.Send{Session: "s", Text: "x"}, nil); !rpc.Failed(err, rpc.Unexpected) {
		t.Errorf("Call without interim = %v, want unexpected", err)
	}
}

func TestServerRefuses(t *testing.T) {
	path := serve(t, &wire.Broker, rpc.On(func(context.Context, sockets.Peer, *wire.ListApprovals) strict.Variant {
		return &wire.Approvals{Calls: []wire.PendingCall{}}
	}))
	raw := func(body []byte) *wire.Error {
		t.Helper()
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b := make([]byte, 4+len(body))
		b[0], b[1], b[2], b[3] = byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body))
		copy(b[4:], body)
		c.Write(b)
		out, err := frame.Read(c, wire.BrokerFrameMax)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		v, err := wire.BrokerMessages.Decode(out)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := frame.Read(c, wire.BrokerFrameMax); !errors.Is(err, io.EOF) {
			t.Errorf("the connection stayed open after a refusal: %v", err)
		}
		return v.(*wire.Error)
	}
	for _, tt := range []struct {
		name, in string
		kind     wire.Kind
		msg      string
	}{
		{"a sibling's message", `{"type":"approve","id":1,"code":"k7m2qx"}`, wire.Forbidden, "approve is not accepted on broker.sock"},
		{"no union's message", `{"type":"send","session":"s","text":"x"}`, wire.Forbidden, "not accepted on broker.sock"},
		{"malformed", `{"type":"list_approvals","x":1}`, wire.Invalid, "did not decode"},
		{"not JSON", `nope`, wire.Invalid, "did not decode"},
	} {
		if e := raw([]byte(tt.in)); e.Kind != tt.kind || !strings.Contains(e.Msg, tt.msg) {
			t.Errorf("%s: %+v, want %s %q", tt.name, e, tt.kind, tt.msg)
		}
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0x10, 0, 0, 0}) // 256 MiB declared
	out, _ := frame.Read(c, wire.BrokerFrameMax)
	if v, _ := wire.BrokerMessages.Decode(out); v == nil || v.(*wire.Error).Kind != wire.TooLarge {
		t.Errorf("over the cap: %s, want too_large", out)
	}
	// The route answers, and a peer's wire.Error is the call's error.
	if a, err := rpc.Ask[*wire.Approvals](t.Context(), &wire.Broker, path, &wire.ListApprovals{}); err != nil || a.Calls == nil {
		t.Errorf("Ask(list) = %v, %v", a, err)
	}
	_, err = rpc.Ask[*wire.Approvals](t.Context(), &wire.Broker, path, &wire.Approve{ID: 1})
	var we *wire.Error
	if !errors.As(err, &we) || we.Kind != wire.Forbidden {
		t.Errorf("Ask(approve) = %v, want brokerd's forbidden as the error", err)
	}
}

func TestDialFailureSaysWhat(t *testing.T) {
	_, err := rpc.Ask[*wire.MemoryDone](t.Context(), &wire.Memadmin, filepath.Join(t.TempDir(), "none"), &wire.Reindex{})
	if !rpc.Failed(err, rpc.Dialing) || !strings.Contains(err.Error(), "memoryd is not running (nothing listens on ") {
		t.Errorf("Ask with nothing listening = %v", err)
	}
}

func TestNewServerPanicsOnBadRoutes(t *testing.T) {
	for name, routes := range map[string][]rpc.Route{
		"twice":      {rpc.On(stopDone), rpc.On(stopDone)},
		"not loop's": {rpc.On(func(context.Context, sockets.Peer, *wire.Reindex) strict.Variant { return nil })},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: NewServer did not panic", name)
				}
			}()
			rpc.NewServer(&wire.Loop, slog.New(slog.DiscardHandler), routes...)
		}()
	}
}
