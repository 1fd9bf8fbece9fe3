package broker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// fakeMemoryd answers every memory call with a recall hit from an
// untrusted session, and passes on what it was sent.
func fakeMemoryd(t *testing.T) (string, chan *wire.MemtoolCall) {
	t.Helper()
	got := make(chan *wire.MemtoolCall, 2)
	path := sockettest.Serve(t, filepath.Join(t.TempDir(), "memtool"), &wire.Memtool, rpc.NewServer(&wire.Memtool, slog.New(slog.DiscardHandler),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.MemtoolCall) strict.Variant {
			got <- m
			return &wire.ToolResult{Status: wire.StatusRan, Output: "memory-tainted: the owner likes tea", Label: dataclass.Label{Class: dataclass.Secret, Untrusted: true}}
		})).Serve)
	return path, got
}

func TestMemoryToolsForwarded(t *testing.T) {
	sock, got := fakeMemoryd(t)
	h := startWith(t, grants, func(c *brokerd.Config) { c.MemtoolSocket = sock })
	r := result(t, h.call(t, "recall", `{"query":"tea","k":3}`))
	if r.Status != wire.StatusRan || r.Output != "memory-tainted: the owner likes tea" || r.Class != dataclass.Secret || !r.Untrusted {
		t.Errorf("recall = %+v, want memoryd's answer with its label", r)
	}
	m := <-got
	if m.Tool != "recall" || m.Session != "s1" || m.Taint != dataclass.Private || m.Untrusted {
		t.Errorf("memoryd got %+v, want the session's own state (private, trusted)", m)
	}
	// The hit's label raised the session: the next call carries it.
	result(t, h.call(t, "recall", `{"query":"again","k":1}`))
	if m := <-got; m.Taint != dataclass.Secret || !m.Untrusted {
		t.Errorf("second call's state = %+v, want secret and untrusted after an untrusted secret hit", m)
	}
	h.stop()
	if rep := audit.Verify(filepath.Join(h.cfg.StateDir, "broker", "audit")); !rep.OK() || rep.Records != 4 {
		t.Errorf("audit: %s (%d records), want 2 decisions and 2 results", rep.Summary(), rep.Records)
	}
	b, _ := os.ReadFile(filepath.Join(h.cfg.StateDir, "broker", "sessions", "s1.json"))
	if !strings.Contains(string(b), `"taint":"secret"`) || !strings.Contains(string(b), `"untrusted":true`) {
		t.Errorf("state file = %s", b)
	}
}

func TestMemoryWithoutMemoryd(t *testing.T) {
	h := start(t, grants)
	r := result(t, h.call(t, "memory", `{"action":"note","text":"x"}`))
	if r.Status == wire.StatusRan || !strings.Contains(r.Output, "see docs/runbook.md#runner-unavailable") {
		t.Errorf("memory without memoryd = %+v", r)
	}
}

func TestRebuildStateMatchesLive(t *testing.T) {
	sock, got := fakeMemoryd(t)
	h := startWith(t, grants, func(c *brokerd.Config) { c.MemtoolSocket = sock })
	result(t, h.call(t, "recall", `{"query":"tea","k":3}`))
	<-got
	h.stop()
	file := filepath.Join(h.cfg.StateDir, "broker", "sessions", "s1.json")
	live, _ := os.ReadFile(file)
	os.Remove(file)
	if err := RebuildState(slog.New(slog.DiscardHandler), h.cfg); err != nil {
		t.Fatal(err)
	}
	if rebuilt, _ := os.ReadFile(file); string(rebuilt) != string(live) || len(live) == 0 {
		t.Errorf("rebuilt state %q, live %q", rebuilt, live)
	}
}
