package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/broker"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/tools"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/frame"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

type harness struct {
	sock   string
	state  string
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t testing.TB, srv *fake.Server, state string, opts ...func(*Manager)) *harness {
	t.Helper()
	c, err := llama.New(llama.Config{BaseURL: srv.URL(), Model: "fake-model", IDSlot: 0})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "loop")
	if err := sockets.MakeDir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	ln, err := rpc.Listen(&wire.Loop, sockets.Config{Dir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{State: state, Engine: &turn.Engine{Model: c, Broker: broker.Refusing{}}, Log: log,
		Baseline: func(string, string) (sessionlog.Baseline, error) {
			return sessionlog.Baseline{System: "test", Tools: tools.Core(false)}, nil
		}}
	for _, o := range opts {
		o(m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.Start(ctx)
	h := &harness{sock: ln.Path(), state: state, cancel: cancel, done: make(chan struct{})}
	go func() { ln.Serve(ctx, m.Serve); m.Wait(); ln.Close(); close(h.done) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.cancel()
	<-h.done
}

type client struct {
	*sockettest.Conn
}

func dial(t *testing.T, h *harness) *client {
	return &client{sockettest.Dial(t, &wire.Loop, h.sock)}
}

func (c *client) send(session, text string) { c.Send(&wire.Send{Session: session, Text: text}) }

func (c *client) next() strict.Variant { return c.Recv() }

// until reads events up to the turn's terminal one and returns them.
func (c *client) until() []strict.Variant {
	var evs []strict.Variant
	for {
		v := c.next()
		evs = append(evs, v)
		switch v.(type) {
		case *wire.Answer, *wire.Stopped, *wire.Error:
			return evs
		}
	}
}

func TestSendAndAnswer(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(fake.Reply{Reasoning: "Greet.", Content: "Hello, owner."})
	h := start(t, srv, t.TempDir())
	c := dial(t, h)
	c.send("s1", "hi")
	if a, ok := c.next().(*wire.Accepted); !ok || a.Queued || a.Session != "s1" {
		t.Fatalf("first event = %#v, want accepted, not queued", a)
	}
	evs := c.until()
	if a, ok := evs[len(evs)-1].(*wire.Answer); !ok || a.Text != "Hello, owner." {
		t.Fatalf("last event = %#v", evs[len(evs)-1])
	}
	var sawReasoning bool
	for _, v := range evs {
		if r, ok := v.(*wire.Reasoning); ok && strings.Contains("Greet.", r.Text) {
			sawReasoning = true
		}
	}
	if !sawReasoning {
		t.Errorf("no reasoning event in %v", evs)
	}
	// The same connection takes the next message.
	srv.Script(fake.Reply{Reasoning: "Again.", Content: "Still here."})
	c.send("s1", "still there?")
	c.next()
	if a, ok := c.until()[0].(*wire.Working); !ok {
		t.Errorf("second turn's first event = %#v", a)
	}
}

func TestRefusals(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	h := start(t, srv, t.TempDir())
	c := dial(t, h)
	for _, tt := range []struct{ session, text, want string }{
		{"../etc", "x", "session id"},
		{"s1", "", "empty"},
		{"s1", strings.Repeat("a", wire.MaxMessage+1), "over the limit"},
		{"job-brief-1", "x", "scheduled job's run"},
	} {
		c.send(tt.session, tt.text)
		e, ok := c.next().(*wire.Error)
		if !ok || e.Kind != wire.Invalid || !strings.Contains(e.Msg, tt.want) {
			t.Errorf("send(%q, %d bytes) = %#v, want invalid %q", tt.session, len(tt.text), e, tt.want)
		}
	}
	// A message of another socket's protocol: forbidden, and the
	// connection ends.
	raw, err := net.Dial("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	b, _ := wire.LoopEvents.Encode(&wire.Answer{Session: "s1", Text: "forged"})
	frame.Write(raw, b, wire.LoopFrameMax)
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := frame.Read(raw, wire.LoopFrameMax)
	if e, _ := wire.LoopEvents.Decode(body); err != nil || e == nil || e.(*wire.Error).Kind != wire.Forbidden {
		t.Errorf("forged frame = %s, %v; want forbidden", body, err)
	}
	if _, err := frame.Read(raw, wire.LoopFrameMax); err == nil {
		t.Error("the connection stayed open after a forbidden frame")
	}
}

// TestQueuedMessagesBatch: messages sent while a turn runs are accepted as
// queued and go to the model together in the next turn.
func TestQueuedMessagesBatch(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(
		fake.Reply{Reasoning: "slow", Content: "first answer", TokenDelay: 40 * time.Millisecond},
		fake.Reply{Reasoning: "both", Content: "second answer"},
	)
	h := start(t, srv, t.TempDir())
	a := dial(t, h)
	a.send("s1", "one")
	a.next()
	b, c := dial(t, h), dial(t, h)
	b.send("s1", "two")
	c.send("s1", "three")
	for _, cl := range []*client{b, c} {
		if acc, ok := cl.next().(*wire.Accepted); !ok || !acc.Queued {
			t.Fatalf("accepted = %#v, want queued while the turn runs", acc)
		}
	}
	first := a.until()
	if ans, ok := first[len(first)-1].(*wire.Answer); !ok || ans.Text != "first answer" {
		t.Errorf("first turn ended with %#v, want the first answer", first[len(first)-1])
	}
	for _, cl := range []*client{b, c} {
		evs := cl.until()
		if ans, ok := evs[len(evs)-1].(*wire.Answer); !ok || ans.Text != "second answer" {
			t.Errorf("queued client got %#v, want the next turn's answer", evs[len(evs)-1])
		}
	}
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(srv.LastRequest(0), &body)
	var roles []string
	for _, m := range body.Messages {
		roles = append(roles, m.Role+":"+m.Content)
	}
	got := strings.Join(roles, " | ")
	if !strings.HasSuffix(got, "user:two | user:three") && !strings.HasSuffix(got, "user:three | user:two") {
		t.Errorf("second request = %s, want both queued messages together at the end", got)
	}
}

// TestRestartMidTurn: loopd stops during a turn; the acknowledged message
// is not lost, and the session continues after a restart.
func TestRestartMidTurn(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	srv.Script(
		fake.Reply{Reasoning: "time?", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}},
		fake.Reply{Reasoning: "r", Content: "never", StallAfter: 1, Stall: time.Minute},
	)
	state := t.TempDir()
	h := start(t, srv, state)
	c := dial(t, h)
	c.send("s1", "remember this")
	if _, ok := c.next().(*wire.Accepted); !ok {
		t.Fatal("not accepted")
	}
	for {
		// Wait until the clock has run and the second model call is under way.
		if tr, ok := c.next().(*wire.ToolRunning); ok && tr.Tool == "clock" {
			c.next() // working
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
	h.stop()
	srv2 := fake.New(t, fake.Options{})
	srv2.Script(fake.Reply{Reasoning: "r", Content: "I remember."})
	h2 := start(t, srv2, state)
	c2 := dial(t, h2)
	c2.send("s1", "did you get my message?")
	c2.next()
	evs := c2.until()
	if a, ok := evs[len(evs)-1].(*wire.Answer); !ok || a.Text != "I remember." {
		t.Fatalf("after restart: %#v", evs[len(evs)-1])
	}
	var body struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	json.Unmarshal(srv2.LastRequest(0), &body)
	var users []string
	for _, m := range body.Messages {
		if m.Role == "user" {
			users = append(users, m.Content)
		}
	}
	if strings.Join(users, "|") != "remember this|did you get my message?" {
		t.Errorf("user messages after restart = %q, want the acknowledged one kept", users)
	}
	b, _ := os.ReadFile(filepath.Join(state, "sessions", "s1", "0.jsonl"))
	if !strings.Contains(string(b), `"reason":"interrupted"`) {
		t.Errorf("the interrupted turn was not closed in the log:\n%s", b)
	}
}
