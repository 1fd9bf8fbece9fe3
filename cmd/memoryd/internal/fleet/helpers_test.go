package fleet

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/honcho"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// turnSpec is one turn of a test session log: what the speaker said,
// a tool call with its result (text, class, trust), reasoning, and the
// final reply.
type turnSpec struct {
	said, reasoning, tool, reply string
	class                        dataclass.Class
	untrusted                    bool
}

// writeLog writes sessions/<id>/0.jsonl with the turns, each ended.
func writeLog(t testing.TB, sessions, id string, turns ...turnSpec) {
	t.Helper()
	dir := filepath.Join(sessions, id)
	os.MkdirAll(dir, 0o700)
	var b strings.Builder
	add := func(r sessionlog.Record) {
		line, err := sessionlog.Records.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	for i, ts := range turns {
		n := int64(i + 1)
		add(&sessionlog.User{Turn: n, Text: ts.said})
		if ts.tool != "" {
			add(&sessionlog.Assistant{Turn: n, Message: chat.Message{Role: "assistant", Content: "let me look " + ts.reasoning, ReasoningContent: ts.reasoning,
				ToolCalls: []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "read_file", Arguments: `{"path":"/x"}`}}}}})
			class := ts.class
			if !class.Valid() {
				class = dataclass.Private
			}
			add(&sessionlog.ToolResult{Turn: n, CallID: "c1", Tool: "read_file", Status: wire.StatusRan, Content: ts.tool, Label: dataclass.Label{Class: class, Untrusted: ts.untrusted}})
		}
		add(&sessionlog.Assistant{Turn: n, Message: chat.Message{Role: "assistant", Content: ts.reply, ReasoningContent: ts.reasoning + " (final)"}})
		add(&sessionlog.TurnEnd{Turn: n})
	}
	if err := os.WriteFile(filepath.Join(dir, "0.jsonl"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// gateServer is a fake brokerd gate.sock: answer decides each answer.
func gateServer(t testing.TB, answer func(q *wire.SessionQuery) strict.Variant) string {
	t.Helper()
	return sockettest.Serve(t, filepath.Join(t.TempDir(), "gate"), &wire.Gate, rpc.NewServer(&wire.Gate, slog.New(slog.DiscardHandler),
		rpc.On(func(_ context.Context, _ sockets.Peer, q *wire.SessionQuery) strict.Variant { return answer(q) })).Serve)
}

// brokerSays is a gate that answers st for every session.
func brokerSays(st State) func(q *wire.SessionQuery) strict.Variant {
	return func(q *wire.SessionQuery) strict.Variant {
		return &wire.SessionState{Session: q.Session, Taint: st.Taint, Untrusted: st.Untrusted}
	}
}

type rig struct {
	t        testing.TB
	honcho   *fake.Server
	sessions string
	db       string
	gate     Gate
	settings honchoconf.Settings
	client   Client
	fleet    *Fleet
}

func settings(t testing.TB, url string, others ...honchoconf.Other) honchoconf.Settings {
	t.Helper()
	s, err := honchoconf.Parse(honchoconf.Config{URL: url, Peer: "agent", TrustedWorkspace: "host1-trusted", UntrustedWorkspace: "host1-untrusted",
		TimeoutMS: 2000, ReadBoundMS: 300, Workspaces: others})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newRig starts a fake Honcho and a fake gate (answer) and opens fleet
// memory over them.
func newRig(t testing.TB, answer func(q *wire.SessionQuery) strict.Variant, others ...honchoconf.Other) *rig {
	t.Helper()
	r := &rig{t: t, honcho: fake.New(t, fake.Options{}), sessions: filepath.Join(t.TempDir(), "sessions"), db: filepath.Join(t.TempDir(), "fleet.db")}
	r.settings = settings(t, r.honcho.URL, others...)
	c, err := honcho.New(r.settings, secret.Value{})
	if err != nil {
		t.Fatal(err)
	}
	r.client = c
	r.gate = Gate{Listeners: []uint32{uint32(os.Getuid())}, Wait: 200 * time.Millisecond}
	if answer != nil {
		r.gate.Socket = gateServer(t, answer)
	}
	r.open()
	return r
}

func (r *rig) open() {
	r.t.Helper()
	f, err := Open(slog.New(slog.DiscardHandler), Config{Honcho: r.settings, Gate: r.gate, Sessions: r.sessions, BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond}, r.client, r.db)
	if err != nil {
		r.t.Fatal(err)
	}
	r.fleet = f
	r.t.Cleanup(func() { f.Close() })
}

// drain sends until the outbox has nothing due, and fails if Honcho keeps
// refusing.
func (r *rig) drain() {
	r.t.Helper()
	for range 100 {
		n, err := r.fleet.SendOnce(context.Background())
		if err != nil {
			r.t.Fatalf("send: %v", err)
		}
		if n == 0 {
			if s, _ := r.fleet.Status(); s.Pending == 0 {
				return
			}
		}
	}
	r.t.Fatal("the outbox did not drain")
}

// where maps each stored message's content to its workspace, and fails
// on a content stored twice.
func where(t testing.TB, srv *fake.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range srv.Messages() {
		if w, dup := out[m.Content]; dup {
			t.Errorf("%q stored twice (in %s and %s)", m.Content, w, m.Workspace)
		}
		out[m.Content] = m.Workspace
	}
	return out
}
