package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// fakeLoop is loopd's loop.sock for gateway tests: it answers each
// message with "echo: <text>" (or what answer returns), after delay.
type fakeLoop struct {
	mu     sync.Mutex
	stops  map[string]chan struct{}
	sends  []wire.Send
	delay  time.Duration
	answer func(text string) string
	ended  map[string][]wire.FinishedTurn // each session's finished turns, turn 1 first
	asked  int                            // answers_since requests
	// running are the sessions whose turn answers_since reports in
	// flight (one a previous gatewayd sent).
	running map[string]bool
	// statusHang makes status_query wait for the request's end.
	statusHang bool
}

func (f *fakeLoop) status(ctx context.Context, _ sockets.Peer, q *wire.StatusQuery) strict.Variant {
	f.mu.Lock()
	hang := f.statusHang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
	}
	return &wire.SessionStatus{Session: q.Session, Model: "qwen3 ![x](https://evil.example/p.png)", Slot: 0, SlotContext: 32768,
		Epoch: 1, Compactions: 1, Turn: 7, ContextTokens: 8192, Reread: 1, Cached: 8000, TodayPrefillMS: 12345,
		Roles: []wire.RoleState{{Role: "inferproxy", Up: true, Version: "v1 abc"}, {Role: "brokerd", Up: false, Detail: "did not answer within 1.5s"}, {Role: "memoryd", Up: true, Version: "v1 abc"}},
		Jobs:  []wire.JobNext{{Name: "digest", Next: "2026-12-02T07:00:00Z"}}, Version: "v1 abc", Server: "llama-server answers through inferproxy",
		BrokerError: "brokerd: did not answer within 1.5s", Approvals: []wire.ApprovalBrief{}, Allowances: []wire.AllowanceBrief{},
		Fleet:    &wire.FleetState{Configured: true, Pending: 2, LastError: "503 @all **down**", NextTry: "2026-12-02T07:01:00Z"},
		AnchorAt: "2026-12-01T07:00:00Z"}
}

// setRunning says whether session has a turn in flight.
func (f *fakeLoop) setRunning(session string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == nil {
		f.running = map[string]bool{}
	}
	f.running[session] = on
}

// askedCount is how many answers_since requests were served.
func (f *fakeLoop) askedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}

func (f *fakeLoop) serve(ctx context.Context, peer sockets.Peer, c net.Conn) {
	rpc.NewServer(&wire.Loop, slog.New(slog.DiscardHandler), rpc.On(f.stop), rpc.On(f.answersSince), rpc.On(f.status), rpc.Stream(f.send)).Serve(ctx, peer, c)
}

// finish records a turn of session that ended with answer text (as one
// that ends while gatewayd is down) and returns its number.
func (f *fakeLoop) finish(session, text string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended == nil {
		f.ended = map[string][]wire.FinishedTurn{}
	}
	n := int64(len(f.ended[session]) + 1)
	f.ended[session] = append(f.ended[session], wire.FinishedTurn{Turn: n, Text: text})
	return n
}

func (f *fakeLoop) answersSince(_ context.Context, _ sockets.Peer, a *wire.AnswersSince) strict.Variant {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	out := &wire.Answers{Session: a.Session, Items: []wire.FinishedTurn{}, Running: f.running[a.Session]}
	for _, it := range f.ended[a.Session] {
		if it.Turn > a.AfterTurn {
			out.Items = append(out.Items, it)
		}
	}
	return out
}

func (f *fakeLoop) stop(_ context.Context, _ sockets.Peer, st *wire.Stop) strict.Variant {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, running := f.stops[st.Session]
	if running {
		close(ch)
		delete(f.stops, st.Session)
	}
	return &wire.StopDone{Session: st.Session, Stopped: running}
}

func (f *fakeLoop) send(ctx context.Context, _ sockets.Peer, c *rpc.Conn, s *wire.Send) error {
	stop := make(chan struct{})
	f.mu.Lock()
	if f.stops == nil {
		f.stops = map[string]chan struct{}{}
	}
	f.stops[s.Session] = stop
	f.sends = append(f.sends, *s)
	delay, answer := f.delay, f.answer
	f.mu.Unlock()
	out := "echo: " + s.Text
	if answer != nil {
		out = answer(s.Text)
	}
	for _, ev := range []strict.Variant{&wire.Accepted{Session: s.Session}, &wire.Working{Session: s.Session},
		&wire.Reasoning{Session: s.Session, Text: "secret thinking"}} {
		c.Send(ev)
	}
	var end strict.Variant
	select {
	case <-time.After(delay):
		end = &wire.Answer{Session: s.Session, Turn: f.finish(s.Session, out), Text: out}
		f.mu.Lock()
		if f.stops[s.Session] == stop {
			delete(f.stops, s.Session)
		}
		f.mu.Unlock()
	case <-stop:
		const msg = "the turn was stopped on request"
		n := f.finish(s.Session, msg)
		f.mu.Lock()
		f.ended[s.Session][n-1].Reason = wire.StopInterrupted
		f.mu.Unlock()
		end = &wire.Stopped{Session: s.Session, Turn: n, Reason: wire.StopInterrupted, Msg: msg}
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.Send(end)
}

func (f *fakeLoop) sent() []wire.Send {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.Send(nil), f.sends...)
}

// rig is a gateway against the fake Mattermost and a fake loopd.
type rig struct {
	mm      *fake.Server
	bot     fake.User
	owner   fake.User
	other   fake.User
	dm      string
	loop    *fakeLoop
	g       *Gateway
	cfg     gatewayd.Config
	logs    *syncBuf
	cancel  context.CancelFunc
	done    chan struct{}
	connect chan string

	lookupRetries []time.Duration // if set, replaces the gateway's
	sweepEvery    time.Duration   // if set, replaces the rig's 50 ms
	gaps          atomic.Int64    // gap fetches the stream asked for
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// newRig starts everything; edit(cfg) may change the config first.
func newRig(t *testing.T, edit func(r *rig, c *gatewayd.Config)) *rig {
	t.Helper()
	r := &rig{mm: fake.New(t), loop: &fakeLoop{}, logs: &syncBuf{}, connect: make(chan string, 100)}
	r.bot = r.mm.AddUser("boxmaker", true)
	r.owner = r.mm.AddUser("owner", false)
	r.other = r.mm.AddUser("mallory", false)
	r.dm = r.mm.Direct(r.bot.ID, r.owner.ID)
	dir := shortDir(t)
	loopSock := sockettest.Serve(t, filepath.Join(dir, "loop"), &wire.Loop, r.loop.serve)
	r.cfg = gatewayd.Config{URL: r.mm.URL(), StateDir: filepath.Join(dir, "state"), LoopSocket: loopSock,
		SocketDir: filepath.Join(dir, "gw"), MaxApprovalParts: gatewayd.DefaultMaxApprovalParts,
		Allow: gatewayd.Allow{Users: []string{r.owner.ID}}}
	if edit != nil {
		edit(r, &r.cfg)
	}
	r.start(t)
	return r
}

func (r *rig) start(t *testing.T) {
	t.Helper()
	os.MkdirAll(r.cfg.SocketDir, 0o700)
	mm, err := mattermost.NewClient(r.cfg.URL, secret.New([]byte(r.bot.Token)), "")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	g, err := New(ctx, log, r.cfg, mm)
	if err != nil {
		t.Fatal(err)
	}
	g.typingEvery = 50 * time.Millisecond
	g.sweepEvery = 50 * time.Millisecond
	if r.sweepEvery != 0 {
		g.sweepEvery = r.sweepEvery
	}
	if r.lookupRetries != nil {
		g.lookupRetries = r.lookupRetries
	}
	s := g.Stream()
	s.MinBackoff, s.MaxBackoff, s.StableAfter = 5*time.Millisecond, 50*time.Millisecond, 100*time.Millisecond
	s.OnConnected = func(id string) {
		select {
		case r.connect <- id:
		default: // only the first is waited for; a test that drops often must not block the read loop
		}
	}
	onGap := s.OnGap
	s.OnGap = func(ctx context.Context) { r.gaps.Add(1); onGap(ctx) }
	r.g, r.cancel, r.done = g, cancel, make(chan struct{})
	go func() { defer close(r.done); g.Serve(ctx) }()
	t.Cleanup(r.stop)
	select {
	case <-r.connect:
	case <-time.After(10 * time.Second):
		t.Fatalf("gateway did not connect:\n%s", r.logs.String())
	}
}

func (r *rig) stop() {
	r.cancel()
	<-r.done
}

// post posts as user in channel (root may be empty).
func (r *rig) post(t *testing.T, user fake.User, channel, root, msg string) fake.Post {
	t.Helper()
	p, err := r.mm.PostAs(user.ID, fake.Post{ChannelID: channel, RootID: root, Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// waitLog is waitFor, showing the gateway's log on failure.
func (r *rig) waitLog(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s\n%s", what, r.logs.String())
}

// botPosts are the bot's posts in a thread.
func (r *rig) botPosts(root string) []fake.Post {
	var out []fake.Post
	for _, p := range r.mm.Thread(root) {
		if p.UserID == r.bot.ID {
			out = append(out, p)
		}
	}
	return out
}

var _ = fmt.Sprint
