package mattermost

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/secret"
)

func client(t *testing.T, srv *fake.Server, token string) *Client {
	t.Helper()
	c, err := NewClient(srv.URL(), secret.New([]byte(token)), "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRESTAgainstFake(t *testing.T) {
	srv := fake.New(t)
	bot := srv.AddUser("boxmaker", true)
	owner := srv.AddUser("owner", false)
	c := client(t, srv, bot.Token)
	ctx := context.Background()
	me, err := c.Me(ctx)
	if err != nil || me.ID != bot.ID || !me.IsBot {
		t.Fatalf("Me = %+v, %v", me, err)
	}
	dm, err := c.DirectChannel(ctx, bot.ID, owner.ID)
	if err != nil || dm.Type != ChannelDirect {
		t.Fatalf("DirectChannel = %+v, %v", dm, err)
	}
	again, _ := c.DirectChannel(ctx, bot.ID, owner.ID)
	if again.ID != dm.ID {
		t.Error("a second DirectChannel made a new channel")
	}
	root, err := srv.PostAs(owner.ID, fake.Post{ChannelID: dm.ID, Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreatePost(ctx, dm.ID, root.ID, "answer")
	if err != nil || p.RootID != root.ID || p.UserID != bot.ID || p.Props["from_bot"] != "true" {
		t.Fatalf("CreatePost = %+v, %v", p, err)
	}
	if err := c.PatchMessage(ctx, p.ID, "edited"); err != nil {
		t.Fatal(err)
	}
	thread, err := c.Thread(ctx, root.ID)
	if err != nil || len(thread) != 2 || thread[0].ID != root.ID || thread[1].Message != "edited" || thread[1].EditAt == 0 {
		t.Fatalf("Thread = %+v, %v", thread, err)
	}
	since, err := c.PostsSince(ctx, dm.ID, root.CreateAt-1)
	if err != nil || len(since) != 2 || since[0].ID != root.ID {
		t.Fatalf("PostsSince = %+v, %v", since, err)
	}
	if err := c.Typing(ctx, dm.ID, root.ID); err != nil || len(srv.Typings()) != 1 {
		t.Fatalf("Typing: %v %v", err, srv.Typings())
	}
	// The server's rune limit: an AppError, parsed.
	_, err = c.CreatePost(ctx, dm.ID, "", strings.Repeat("é", MaxRunes+1))
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.ID != "model.post.is_valid.message_length.app_error" {
		t.Errorf("over-long post: %v", err)
	}
	if _, err := c.CreatePost(ctx, dm.ID, "", strings.Repeat("é", MaxRunes)); err != nil {
		t.Errorf("a post of exactly the limit: %v", err)
	}
	// A bad token: 401, and the token appears in no error.
	bad := client(t, srv, "not-the-token-sekrit")
	if _, err := bad.Me(ctx); !errors.As(err, &ae) || ae.Status != 401 || strings.Contains(err.Error(), "sekrit") {
		t.Errorf("bad token: %v", err)
	}
}

func TestRateLimitRetried(t *testing.T) {
	srv := fake.New(t)
	bot := srv.AddUser("boxmaker", true)
	c := client(t, srv, bot.Token)
	srv.Throttle(1)
	start := time.Now()
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatalf("Me after a 429: %v", err)
	}
	if time.Since(start) < 900*time.Millisecond {
		t.Error("the client did not wait Retry-After")
	}
	c.MaxRetries = 0
	srv.Throttle(1)
	var ae *APIError
	if _, err := c.Me(context.Background()); !errors.As(err, &ae) || ae.Status != 429 || ae.ID != "" {
		t.Errorf("429 with no retries left: %v", err)
	}
}

func TestNewClientRefuses(t *testing.T) {
	tok := secret.New([]byte("t"))
	for _, u := range []string{"ftp://x", "https://", "https://user:pw@host", "https://h/?q=1", "host:443"} {
		if _, err := NewClient(u, tok, ""); err == nil {
			t.Errorf("NewClient(%q) accepted", u)
		}
	}
	if _, err := NewClient("https://h", secret.Value{}, ""); err == nil {
		t.Error("empty token accepted")
	}
	if _, err := NewClient("https://h", tok, "/nonexistent/ca.pem"); err == nil {
		t.Error("missing CA file accepted")
	}
}

// streamRig runs a Stream against the fake and records what it saw.
type streamRig struct {
	mu     sync.Mutex
	events []string // post messages, in order
	gaps   int
	hellos chan string
}

func runStream(t *testing.T, srv *fake.Server, token string) *streamRig {
	r := &streamRig{hellos: make(chan string, 10)}
	s := &Stream{Client: client(t, srv, token), Log: slog.New(slog.DiscardHandler),
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		OnEvent: func(_ context.Context, e *Event) {
			if e.Event != "posted" {
				return
			}
			p, err := ParsePosted(e)
			if err != nil {
				t.Errorf("ParsePosted: %v", err)
				return
			}
			r.mu.Lock()
			r.events = append(r.events, p.Post.Message)
			r.mu.Unlock()
		},
		OnGap:       func(context.Context) { r.mu.Lock(); r.gaps++; r.mu.Unlock() },
		OnConnected: func(id string) { r.hellos <- id },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-r.hellos:
	case <-time.After(5 * time.Second):
		t.Fatal("no hello")
	}
	return r
}

func (r *streamRig) seen() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...), r.gaps
}

// TestStreamResume: a dropped connection whose events are still in the
// server's queues resumes with no hello and no gap; one whose queues are
// lost gets a new connection id, and the stream reports the gap.
func TestStreamResume(t *testing.T) {
	srv := fake.New(t)
	bot := srv.AddUser("boxmaker", true)
	owner := srv.AddUser("owner", false)
	dm := srv.Direct(bot.ID, owner.ID)
	r := runStream(t, srv, bot.Token)
	post := func(m string) {
		if _, err := srv.PostAs(owner.ID, fake.Post{ChannelID: dm, Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	post("one")
	srv.Drop(false)
	post("two")
	post("three")
	waitSeen(t, r, 3)
	// Three root posts are three threads, handled in lanes of their own:
	// each once, in no order between them.
	if ev, gaps := r.seen(); strings.Join(slices.Sorted(slices.Values(ev)), ",") != "one,three,two" || gaps != 0 || len(r.hellos) != 0 {
		t.Fatalf("after a resumable drop: %v, gaps %d, hellos %d", ev, gaps, len(r.hellos))
	}
	srv.Drop(true)
	post("four") // lost with the queues: no connection holds it
	select {
	case <-r.hellos:
	case <-time.After(5 * time.Second):
		t.Fatal("no new hello after the queues were lost")
	}
	post("five")
	waitSeen(t, r, 4)
	if ev, gaps := r.seen(); gaps != 1 || ev[len(ev)-1] != "five" {
		t.Fatalf("after a lossy drop: %v, gaps %d", ev, gaps)
	}
}

func waitSeen(t *testing.T, r *streamRig, n int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if ev, _ := r.seen(); len(ev) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	ev, _ := r.seen()
	t.Fatalf("saw %v, want %d events", ev, n)
}

// TestPostsSincePages: the server returns at most SinceCap posts per
// since query; a longer gap is fetched page by page, nothing lost, none
// twice.
func TestPostsSincePages(t *testing.T) {
	srv := fake.New(t)
	bot := srv.AddUser("boxmaker", true)
	owner := srv.AddUser("owner", false)
	dm := srv.Direct(bot.ID, owner.ID)
	c := client(t, srv, bot.Token)
	first, err := srv.PostAs(owner.ID, fake.Post{ChannelID: dm, Message: "0"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*SinceCap + 500
	for i := 1; i < n; i++ {
		if _, err := srv.PostAs(owner.ID, fake.Post{ChannelID: dm, Message: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.PostsSince(context.Background(), dm, first.CreateAt-1)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, p := range got {
		ids[p.ID] = true
	}
	if len(got) != n || len(ids) != n || got[0].ID != first.ID {
		t.Errorf("PostsSince returned %d posts (%d distinct), want %d", len(got), len(ids), n)
	}
}
