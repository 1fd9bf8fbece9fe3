package server

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// brokerStub serves broker.sock's status query in a new directory with
// one pending approval, and returns the socket's path.
func brokerStub(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	l, err := rpc.Listen(&wire.Broker, sockets.Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); l.Close() })
	go l.Serve(ctx, rpc.NewServer(&wire.Broker, slog.New(slog.DiscardHandler), rpc.On(func(context.Context, sockets.Peer, *wire.BrokerStatusQuery) strict.Variant {
		return &wire.BrokerStatus{Version: "v9", Approvals: []wire.ApprovalBrief{{ID: 5, Session: "s1", Tool: "fetch", Expires: "2026-12-02T08:00:00Z"}}, Allowances: []wire.AllowanceBrief{}}
	})).Serve)
	return l.Path()
}

// TestStatusQuery: loopd's status answer for a session after a turn (its
// epoch, context, cache figures from the log, not running), its peers as
// they answer (brokerd's approvals, memoryd down, inferproxy accepting,
// llama-server's /props), the owner's anchor time, and a bad session id
// refused; nothing is written.
func TestStatusQuery(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(fake.Reply{Reasoning: "Greet.", Content: "Hello."})
	state := t.TempDir()
	up := filepath.Join(t.TempDir(), "up.sock")
	l, err := net.Listen("unix", up)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.MkdirAll(layout.Metrics.In(state), 0o755)
	anchored := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	if err := audit.WriteAnchorTime(layout.AnchorTimeFile(state), anchored); err != nil {
		t.Fatal(err)
	}
	h := start(t, srv, state, func(m *Manager) {
		m.Status = StatusInfo{Model: "fake-model", Slot: 0, SlotContext: 4096,
			Peers: []StatusPeer{{Role: "brokerd", Socket: brokerStub(t)}, {Role: "memoryd", Socket: filepath.Join(state, "none.sock")}, {Role: "inferproxy", Socket: up}},
			Props: func(context.Context) (int, error) { return 8192, nil }}
	})
	c := dial(t, h)
	c.send("s1", "hi")
	c.until()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The answer is sent before the turn's end is settled (memoryd hears
	// of it after): ask until the turn no longer runs.
	var st *wire.SessionStatus
	for i := 0; i < 200; i++ {
		var err error
		if st, err = rpc.Ask[*wire.SessionStatus](ctx, &wire.Loop, h.sock, &wire.StatusQuery{Session: "s1"}); err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.Session != "s1" || st.Model != "fake-model" || st.SlotContext != 8192 || st.Epoch != 0 || st.Turn != 1 || st.Running || st.ContextTokens == 0 {
		t.Errorf("status = %+v", st)
	}
	if len(st.Roles) != 3 || !st.Roles[0].Up || st.Roles[0].Version != "v9" || st.Roles[1].Up || !st.Roles[2].Up || st.Version == "" {
		t.Errorf("roles = %+v, want brokerd up (v9), memoryd down, inferproxy up", st.Roles)
	}
	if len(st.Approvals) != 1 || st.Approvals[0].ID != 5 || st.BrokerError != "" || st.Fleet != nil || !strings.Contains(st.FleetError, "memoryd: down") ||
		st.Server != "llama-server answers through inferproxy" || st.AnchorAt != "2026-12-01T07:00:00Z" {
		t.Errorf("status = %+v", st)
	}
	if _, err := rpc.Ask[*wire.SessionStatus](ctx, &wire.Loop, h.sock, &wire.StatusQuery{Session: "../x"}); err == nil {
		t.Error("a bad session id was answered")
	}
	st, err = rpc.Ask[*wire.SessionStatus](ctx, &wire.Loop, h.sock, &wire.StatusQuery{Session: "never"})
	if err != nil || st.Turn != 0 || st.Epoch != 0 {
		t.Errorf("a session that does not exist: %+v, %v", st, err)
	}
	if m, _ := filepath.Glob(filepath.Join(state, "sessions", "never")); len(m) != 0 {
		t.Error("a status query made a session")
	}
}

// TestStatusQueryBounded: a brokerd and a memoryd that accept and never
// answer, and a llama-server that never answers /props, cost the status
// answer at most PeerProbe, and each is reported as silent.
func TestStatusQueryBounded(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	state := t.TempDir()
	silent := func() string {
		p := filepath.Join(t.TempDir(), "silent.sock")
		l, err := net.Listen("unix", p)
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
				t.Cleanup(func() { c.Close() })
			}
		}()
		return p
	}
	old := PeerProbe
	PeerProbe = 300 * time.Millisecond
	t.Cleanup(func() { PeerProbe = old })
	h := start(t, srv, state, func(m *Manager) {
		m.Status = StatusInfo{Model: "fake-model", SlotContext: 4096,
			Peers: []StatusPeer{{Role: "brokerd", Socket: silent()}, {Role: "memoryd", Socket: silent()}},
			Props: func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	st, err := rpc.Ask[*wire.SessionStatus](ctx, &wire.Loop, h.sock, &wire.StatusQuery{Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Errorf("the answer took %v with silent peers; the bound is %v", d, PeerProbe)
	}
	for _, r := range st.Roles {
		if r.Up || r.Detail != "did not answer within 300ms" {
			t.Errorf("role %+v, want silent", r)
		}
	}
	if st.Server != "llama-server did not answer within 300ms" || st.BrokerError != "brokerd: did not answer within 300ms" || st.SlotContext != 4096 {
		t.Errorf("status = %+v", st)
	}
}
