package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/tools"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestSessionChannel: a session keeps the channel of its first message
// in its baseline (memoryd reads it there for the session's project); a
// later message from another channel is refused, one without a channel
// (bxctl chat) joins, and a channel that is no Mattermost id is invalid.
func TestSessionChannel(t *testing.T) {
	const a, b = "aaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbb"
	srv := fake.New(t, fake.Options{})
	state := t.TempDir()
	h := start(t, srv, state, func(m *Manager) {
		m.Baseline = func(_, channel string) (sessionlog.Baseline, error) {
			return sessionlog.Baseline{System: "test", Tools: tools.Core(false), Channel: channel}, nil
		}
	})
	c := dial(t, h)
	srv.Script(fake.Reply{Content: "one"})
	c.Send(&wire.Send{Session: "s1", Text: "hi", Channel: a})
	if evs := c.until(); evs[len(evs)-1].Tag() != "answer" {
		t.Fatalf("first message: %#v", evs[len(evs)-1])
	}
	if base, err := os.ReadFile(filepath.Join(session.Dir(state, "s1"), "0.baseline.json")); err != nil || !strings.Contains(string(base), `"channel":"`+a+`"`) {
		t.Errorf("baseline = %s, %v", base, err)
	}
	c.Send(&wire.Send{Session: "s1", Text: "from elsewhere", Channel: b})
	if e, ok := c.next().(*wire.Error); !ok || e.Kind != wire.Denied || !strings.Contains(e.Msg, "belongs to channel "+a) || !strings.Contains(e.Msg, "runbook.md#session-channel-differs") {
		t.Errorf("another channel's message = %#v", e)
	}
	c.Send(&wire.Send{Session: "s2", Text: "hi", Channel: "town-square"})
	if e, ok := c.next().(*wire.Error); !ok || e.Kind != wire.Invalid {
		t.Errorf("a bad channel = %#v", e)
	}
	srv.Script(fake.Reply{Content: "two"})
	c.Send(&wire.Send{Session: "s1", Text: "from the terminal"})
	if evs := c.until(); evs[len(evs)-1].Tag() != "answer" {
		t.Fatalf("a message without a channel: %#v", evs[len(evs)-1])
	}
}
