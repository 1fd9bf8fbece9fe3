package memd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestForgetFleet: forgetting a session record memoryd filed to Honcho
// deletes, as Honcho's API allows, the Honcho session that holds it (the
// fake records the DELETE); the session's other messages are filed again
// under a new session, the forgotten one never; and recall drops the
// forgotten message while Honcho's deletion job has not run yet.
func TestForgetFleet(t *testing.T) {
	h, srv, _ := startFleet(t, fake.Options{})
	dir := filepath.Join(h.cfg.StateDir, "sessions", "s1")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "0.jsonl"), []byte(`{"type":"user","turn":1,"text":"send the kukicha invoices to mallory"}
{"type":"assistant","turn":1,"message":{"role":"assistant","content":"I will send kukicha invoices there.","reasoning_content":"ok"}}
{"type":"turn_end","turn":1}
`), 0o600)
	if v := h.ask(t, h.cfg.MemorySocketDir, &wire.Memory, &wire.TurnDone{Session: "s1", Epoch: 0, Turn: 1}); v.Tag() != "turn_indexed" {
		t.Fatalf("turn_done = %#v", v)
	}
	waitFor(t, func() bool {
		st, _ := h.admin(t, &wire.FleetStatus{}).(*wire.FleetState)
		return st != nil && st.Sent == 2 && st.Pending == 0
	})

	d, ok := h.admin(t, &wire.MemoryForget{ID: "session s1 epoch 0 turn 1 record 1"}).(*wire.MemoryDone)
	if !ok {
		t.Fatal("forget failed")
	}
	for _, want := range []string{"forgot session s1 epoch 0 turn 1 record 1", "Honcho cannot delete one message",
		"delete Honcho session s1 of workspace host1-trusted", "its other 1 messages are filed again under session s1--after-n1",
		"Honcho accepted the deletion (202)", "peer cards and representations"} {
		if !strings.Contains(d.Msg, want) {
			t.Errorf("receipt lacks %q:\n%s", want, d.Msg)
		}
	}
	var deletes int
	for _, r := range srv.Requests() {
		if r.Method == "DELETE" && r.Path == "/v3/workspaces/host1-trusted/sessions/s1" {
			deletes++
		}
	}
	if deletes != 1 {
		t.Errorf("the fake saw %d deletions of session s1, want 1: %+v", deletes, srv.Requests())
	}
	// Before Honcho's deletion job runs, its search still finds the
	// message; recall must not return it.
	r := h.tool(t, "s9", "recall", `{"query":"kukicha","k":10}`, dataclass.Private, false)
	if strings.Contains(r.Output, "send the kukicha invoices to mallory") {
		t.Errorf("recall returns the forgotten message:\n%s", r.Output)
	}
	waitFor(t, func() bool {
		for _, m := range srv.Messages() {
			if m.Session == "s1--after-n1" && m.Content == "I will send kukicha invoices there." {
				return true
			}
		}
		return false
	})
	srv.RunDeletions()
	// A resync files everything again: never the forgotten message.
	if _, ok := h.admin(t, &wire.FleetResync{}).(*wire.MemoryDone); !ok {
		t.Fatal("resync failed")
	}
	waitFor(t, func() bool {
		st, _ := h.admin(t, &wire.FleetStatus{}).(*wire.FleetState)
		return st != nil && st.Pending == 0
	})
	for _, m := range srv.Messages() {
		if strings.Contains(m.Content, "mallory") {
			t.Errorf("Honcho holds the forgotten message again: %+v", m)
		}
	}
	if ms := srv.Messages(); len(ms) != 1 || ms[0].Session != "s1--after-n1" {
		t.Errorf("Honcho holds %+v, want only the reply, under s1--after-n1", ms)
	}
}

// TestWhyHoncho: a Honcho hit's why names its workspace and the trust
// memoryd.toml gives it, and says Honcho keeps no per-entry provenance.
func TestWhyHoncho(t *testing.T) {
	h, _, _ := startFleet(t, fake.Options{})
	for _, tt := range []struct{ id, want string }{
		{"honcho workspace host1-untrusted session x1 peer someone", "this agent's untrusted workspace: its hits are memory-tainted"},
		{"honcho workspace host2-trusted session x1 peer someone", "another agent's workspace, read as trusted (memoryd.toml)"},
		{"honcho workspace elsewhere session x1 peer someone", "not a workspace memoryd.toml names"},
	} {
		c, ok := h.admin(t, &wire.MemoryWhy{ID: tt.id}).(*wire.WhyChain)
		if !ok {
			t.Fatalf("why %q: no chain", tt.id)
		}
		got := strings.Join(c.Steps, "\n")
		if !strings.Contains(got, tt.want) || !strings.Contains(got, "Honcho keeps no per-entry provenance") || c.Session != "" {
			t.Errorf("why %q:\n%s", tt.id, got)
		}
	}
}
