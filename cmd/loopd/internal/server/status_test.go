package server

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestStatusQuery: loopd's status answer for a session after a turn (its
// epoch, context, cache figures from the log, not running), its peers as
// their sockets answer, and a bad session id refused; nothing is written.
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
	h := start(t, srv, state, func(m *Manager) {
		m.Status = StatusInfo{Model: "fake-model", Slot: 0, SlotContext: 4096,
			Peers: []StatusPeer{{Role: "brokerd", Socket: up}, {Role: "memoryd", Socket: filepath.Join(state, "none.sock")}}}
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
	if st.Session != "s1" || st.Model != "fake-model" || st.SlotContext != 4096 || st.Epoch != 0 || st.Turn != 1 || st.Running || st.ContextTokens == 0 {
		t.Errorf("status = %+v", st)
	}
	if len(st.Roles) != 2 || !st.Roles[0].Up || st.Roles[1].Up {
		t.Errorf("roles = %+v, want brokerd up, memoryd down", st.Roles)
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
