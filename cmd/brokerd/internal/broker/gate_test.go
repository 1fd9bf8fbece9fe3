package broker

import (
	"os"
	"path/filepath"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestGateAnswersSessionStateOnly: gate.sock answers a session's state
// as the ledger holds it (fresh, then raised by an untrusted secret
// result), and refuses every other message; broker.sock and admin.sock
// refuse the query.
func TestGateAnswersSessionStateOnly(t *testing.T) {
	sock, got := fakeMemoryd(t)
	gateDir := filepath.Join(t.TempDir(), "gate")
	if err := sockets.MakeDir(gateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	h := startWith(t, grants, func(c *brokerd.Config) { c.MemtoolSocket = sock; c.GateSocketDir = gateDir })
	ask := func(session string) strict.Variant {
		c := h.dial(t, gateDir, &wire.Gate)
		c.Send(&wire.SessionQuery{Session: session})
		return c.Recv()
	}
	if st, ok := ask("s1").(*wire.SessionState); !ok || st.Session != "s1" || st.Taint != dataclass.Private || st.Untrusted {
		t.Fatalf("fresh session's state = %#v, want private and trusted", st)
	}
	result(t, h.call(t, "recall", `{"query":"tea","k":3}`))
	<-got
	if st, ok := ask("s1").(*wire.SessionState); !ok || st.Taint != dataclass.Secret || !st.Untrusted {
		t.Errorf("state after an untrusted secret result = %#v", st)
	}
	if e, ok := ask("../s1").(*wire.Error); !ok || e.Kind != wire.Invalid {
		t.Errorf("a bad session id = %#v, want invalid", e)
	}
	for _, m := range []strict.Variant{
		&wire.ToolRequest{Session: "s1", CallID: "c1", Tool: "recall", Arguments: []byte(`{"query":"x"}`)},
		&wire.Approve{ID: 1, Code: "000000"},
		&wire.ListApprovals{},
	} {
		c := h.dial(t, gateDir, &wire.Gate)
		c.Send(m)
		if e, ok := c.Recv().(*wire.Error); !ok || e.Kind != wire.Forbidden {
			t.Errorf("%s on gate.sock = %#v, want forbidden", m.Tag(), e)
		}
	}
	for _, s := range []struct {
		dir  string
		sock *wire.Socket
	}{{h.cfg.BrokerSocketDir, &wire.Broker}, {h.cfg.AdminSocketDir, &wire.Admin}} {
		c := h.dial(t, s.dir, s.sock)
		c.Send(&wire.SessionQuery{Session: "s1"})
		if e, ok := c.Recv().(*wire.Error); !ok || e.Kind != wire.Forbidden {
			t.Errorf("session_query on %s = %#v, want forbidden", s.sock.Name, e)
		}
	}
}

// TestGateDirMustDiffer: gate.sock's directory is the table's own, never
// broker.sock's (memoryd could run tools) or admin.sock's (it could
// answer approvals), and a config naming broker.sock's is refused.
func TestGateDirMustDiffer(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "brokerd.toml")
	os.WriteFile(p, nil, 0o600)
	c, _, err := brokerd.Load(p, "/s")
	if err != nil || c.GateSocketDir == c.BrokerSocketDir || c.GateSocketDir == c.AdminSocketDir || c.GateSocketDir != "/s/run/gate" {
		t.Errorf("gate.sock's directory %q (broker's %q, admin's %q): %v", c.GateSocketDir, c.BrokerSocketDir, c.AdminSocketDir, err)
	}
	os.WriteFile(p, []byte("gate_socket_dir = \"/s/run/broker\"\n"), 0o600)
	if _, _, err := brokerd.Load(p, "/s"); err == nil {
		t.Error("gate_socket_dir equal to broker.sock's directory was accepted")
	}
}
