package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/epoch"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/tools"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestFullMidTurnChangesAtIdle: a turn whose tool results fill the
// context ends with session_full; the epoch then changes at the next idle
// moment, once, without a summary request the slot could not hold.
func TestFullMidTurnChangesAtIdle(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(fake.Reply{Reasoning: "Time.", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}})
	bg, err := llama.New(llama.Config{BaseURL: srv.URL(), Model: "fake-model", IDSlot: 1})
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	h := start(t, srv, state, func(m *Manager) {
		// A one-token slot: the first request is the server's to refuse
		// (the fake's is bigger), so the engine's own check stops the
		// turn before its second request.
		m.Engine.Context = turn.Context{NCtx: 1}
		m.Policy = Policy{IdleAfter: 100 * time.Millisecond, CompactAt: 60}
		m.Epoch = &epoch.Changer{Summarise: bg, NCtx: 1, Log: slog.New(slog.DiscardHandler),
			Baseline: func(context.Context, string, string, int64) (sessionlog.Baseline, error) {
				return sessionlog.Baseline{System: "test, epoch 1", Tools: tools.Core(false)}, nil
			}}
	})
	c := dial(t, h)
	c.send("s1", "what time is it?")
	c.next()
	evs := c.until()
	if st, ok := evs[len(evs)-1].(*wire.Stopped); !ok || st.Reason != wire.StopSessionFull {
		t.Fatalf("last event = %#v, want a session_full stop", evs[len(evs)-1])
	}
	dir := session.Dir(state, "s1")
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "1.jsonl")); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the full session did not change epoch at idle")
		}
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "2.jsonl")); err == nil {
		t.Fatal("the session changed epoch twice in one idle period")
	}
	if n := len(srv.Requests(1)); n != 0 {
		t.Errorf("%d summary requests, want none: the full epoch cannot fit one", n)
	}
}
