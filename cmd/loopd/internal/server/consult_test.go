package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/broker"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/tools"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Markers planted in a session where a consult must never look: its
// identity and memory (the baseline's system text), its history (a user
// message) and an earlier tool result.
const (
	markIdentity = "MARKER-IDENTITY-41"
	markMemory   = "MARKER-MEMORY-42"
	markHistory  = "MARKER-HISTORY-43"
	markTool     = "MARKER-TOOLRESULT-44"
)

// consultPort plays brokerd: read_file answers with a marker; a consult
// is held, as brokerd holds it after consult_pending, until released.
type consultPort struct {
	mu      sync.Mutex
	calls   []wire.ToolRequest
	entered chan struct{}
	release chan struct{}
}

func (p *consultPort) Call(ctx context.Context, r wire.ToolRequest, _ func(int64)) wire.ToolResult {
	p.mu.Lock()
	p.calls = append(p.calls, r)
	p.mu.Unlock()
	if r.Tool != "consult" {
		return wire.ToolResult{Status: wire.StatusRan, Output: "file: " + markTool, Label: dataclass.Label{Class: dataclass.Private}}
	}
	p.entered <- struct{}{}
	select {
	case <-p.release:
	case <-ctx.Done():
	}
	return wire.ToolResult{Status: wire.StatusRan, Output: "[consult: the answer]\nforty-two", Label: dataclass.Label{Class: dataclass.Private, Untrusted: true}}
}

func startWithPort(t *testing.T, srv *fake.Server, state string, port broker.Port) *harness {
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
	m := &Manager{State: state, Engine: &turn.Engine{Model: c, Broker: port}, Log: log,
		Baseline: func(string, string) (sessionlog.Baseline, error) {
			return sessionlog.Baseline{System: "test\n# identity\n" + markIdentity + "\n# memory\n" + markMemory, Tools: tools.Core(false)}, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	m.Start(ctx)
	h := &harness{sock: ln.Path(), state: state, cancel: cancel, done: make(chan struct{})}
	go func() { ln.Serve(ctx, m.Serve); m.Wait(); ln.Close(); close(h.done) }()
	t.Cleanup(h.stop)
	return h
}

// TestConsultPendingLeavesOtherThreads: while thread A's consult is
// pending (the turn suspended in brokerd's call, no request to the model
// in flight), thread B's turn runs to completion on the same main slot;
// an owner message in A meanwhile is logged and queued for A's next turn
// (the batching rule); the answer lands as A's newest tool result,
// labelled with the grant's class and untrusted, and A's turn and then
// the queued one finish. brokerd receives exactly the model's consult
// arguments: none of the planted markers.
func TestConsultPendingLeavesOtherThreads(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	consultArgs := `{"name":"consult","arguments":{"question":"What is six times seven?"}}`
	srv.Script(
		fake.Reply{Content: "", ToolCalls: []fake.ToolCall{{Name: "call_tool", Arguments: `{"name":"read_file","arguments":{"path":"/n"}}`}}},
		fake.Reply{ToolCalls: []fake.ToolCall{{Name: "call_tool", Arguments: consultArgs}}},
		fake.Reply{Content: "B is done."},
		fake.Reply{Content: "A is done: forty-two."},
		fake.Reply{Content: "A's second turn."},
	)
	port := &consultPort{entered: make(chan struct{}, 1), release: make(chan struct{})}
	state := t.TempDir()
	h := startWithPort(t, srv, state, port)
	a := dial(t, h)
	a.send("A", "please ask: "+markHistory)
	a.next()
	select {
	case <-port.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the consult never reached brokerd")
	}
	// Thread B, on the same main slot, while A's consult is pending.
	b := dial(t, h)
	b.send("B", "hello")
	b.next()
	evs := b.until()
	if ans, ok := evs[len(evs)-1].(*wire.Answer); !ok || ans.Text != "B is done." {
		t.Fatalf("B's turn did not finish while A's consult was pending: %#v", evs[len(evs)-1])
	}
	if n := len(srv.Requests(0)); n != 3 {
		t.Errorf("slot 0 has %d requests, want 3 (A twice, then B)", n)
	}
	// The owner writes in A while its consult is pending: queued.
	a2 := dial(t, h)
	a2.send("A", "and one more thing")
	if acc, ok := a2.next().(*wire.Accepted); !ok || !acc.Queued {
		t.Fatalf("a message during the pending consult = %#v, want accepted and queued", acc)
	}
	close(port.release)
	evs = a.until()
	if ans, ok := evs[len(evs)-1].(*wire.Answer); !ok || ans.Text != "A is done: forty-two." {
		t.Fatalf("A's turn = %#v", evs[len(evs)-1])
	}
	evs = a2.until()
	if ans, ok := evs[len(evs)-1].(*wire.Answer); !ok || ans.Text != "A's second turn." {
		t.Fatalf("A's queued turn = %#v", evs[len(evs)-1])
	}
	// What brokerd was given for the consult: the model's arguments, only.
	var got wire.ToolRequest
	for _, c := range port.calls {
		if c.Tool == "consult" {
			got = c
		}
	}
	if string(got.Arguments) != `{"question":"What is six times seven?"}` {
		t.Errorf("consult arguments %s", got.Arguments)
	}
	for _, m := range []string{markIdentity, markMemory, markHistory, markTool} {
		if strings.Contains(string(got.Arguments), m) {
			t.Errorf("the consult request carries %s", m)
		}
	}
	// The answer is A's tool result, labelled, and the log replays.
	s, err := session.Open(state, "A", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var found bool
	for _, r := range s.Records() {
		if tr, ok := r.(*sessionlog.ToolResult); ok && tr.Tool == "consult" {
			found = tr.Untrusted && tr.Class == dataclass.Private && strings.HasSuffix(tr.Content, "forty-two")
		}
	}
	if !found {
		b, _ := json.Marshal(s.Records())
		t.Errorf("no labelled consult result in A's log: %s", b)
	}
}
