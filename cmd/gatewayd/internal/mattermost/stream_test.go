package mattermost

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"wntrmute.dev/boxmaker/pkg/host/secret"
)

// wsServer is a bare WebSocket server speaking just enough of
// Mattermost's stream (a hello, then what serve writes) to misbehave.
// With resume, a reconnect naming a connection id gets no hello (as when
// the server replays its dead queue).
func wsServer(t *testing.T, resume bool, serve func(ctx context.Context, c *websocket.Conn, n int, r *http.Request)) *Client {
	t.Helper()
	var conns atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		n := int(conns.Add(1))
		ctx := c.CloseRead(r.Context()) // answers the client's pings, as the server's reader does
		hello := fmt.Sprintf(`{"event":"hello","data":{"connection_id":"c%d","server_version":"x"},"broadcast":{},"seq":0}`, n)
		if !resume || r.URL.Query().Get("connection_id") == "" {
			if c.Write(ctx, websocket.MessageText, []byte(hello)) != nil {
				return
			}
		}
		serve(ctx, c, n, r)
	}))
	t.Cleanup(hs.Close)
	c, err := NewClient(hs.URL, secret.New([]byte("tok")), "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func runIt(t *testing.T, s *Stream) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func typing(seq int) []byte {
	return fmt.Appendf(nil, `{"event":"typing","data":{},"broadcast":{},"seq":%d}`, seq)
}

// TestBlockedHandlerKeepsConnection: while the handler is stuck (as on a
// 429 retry), the read loop keeps reading: the server's pings are
// answered and later events are read and queued on the same connection.
func TestBlockedHandlerKeepsConnection(t *testing.T) {
	release := make(chan struct{})
	pinged := make(chan error, 1)
	var got atomic.Int64
	c := wsServer(t, false, func(ctx context.Context, c *websocket.Conn, n int, _ *http.Request) {
		if n > 1 {
			t.Errorf("the stream reconnected (connection %d): the blocked handler stalled its read loop", n)
			return
		}
		for seq := 1; seq <= 5; seq++ {
			if c.Write(ctx, websocket.MessageText, typing(seq)) != nil {
				return
			}
		}
		for i := 0; i < 3; i++ { // each ping needs the client's read loop to answer
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.Ping(pctx)
			cancel()
			if err != nil {
				pinged <- err
				return
			}
		}
		pinged <- nil
		<-ctx.Done()
	})
	s := &Stream{Client: c, Log: slog.New(slog.DiscardHandler), QueueLen: 8,
		OnEvent: func(ctx context.Context, e *Event) {
			got.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}}
	runIt(t, s)
	select {
	case err := <-pinged:
		if err != nil {
			t.Fatalf("ping while the handler blocked: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server's pings were never answered")
	}
	// The handler runs on its lane's worker, which a loaded machine may
	// schedule after the pings were answered: wait for its first entry,
	// then give a wrong second one time to show.
	for i := 0; i < 500 && got.Load() < 1; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := got.Load(); n != 1 {
		t.Fatalf("handler entered %d times while the first call blocked, want 1", n)
	}
	close(release)
	for i := 0; i < 500 && got.Load() < 5; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := got.Load(); n != 5 {
		t.Fatalf("handled %d events after release, want 5 in one connection", n)
	}
}

// TestFullQueueReplays: an event that finds the queue full ends the
// connection without being counted, so the reconnect asks for it again
// and every event is handled once, in order.
func TestFullQueueReplays(t *testing.T) {
	release := make(chan struct{})
	asked := make(chan string, 10)
	c := wsServer(t, true, func(ctx context.Context, c *websocket.Conn, n int, r *http.Request) {
		from := 1
		if n > 1 {
			q := r.URL.Query()
			select {
			case asked <- q.Get("connection_id") + "@" + q.Get("sequence_number"):
			default:
			}
			from, _ = strconv.Atoi(q.Get("sequence_number"))
		}
		for seq := from; seq <= 6; seq++ {
			if c.Write(ctx, websocket.MessageText, typing(seq)) != nil {
				return
			}
		}
		<-ctx.Done()
	})
	var mu sync.Mutex
	var seqs []int64
	s := &Stream{Client: c, Log: slog.New(slog.DiscardHandler), QueueLen: 1, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		OnEvent: func(ctx context.Context, e *Event) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			mu.Lock()
			seqs = append(seqs, e.Seq)
			mu.Unlock()
		}}
	runIt(t, s)
	var first string
	select {
	case first = <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("a full queue did not end the connection")
	}
	if first != "c1@2" && first != "c1@3" { // one event in the handler, at most one queued
		t.Fatalf("reconnect asked for %q, want c1@2 or c1@3", first)
	}
	close(release)
	for i := 0; i < 1000; i++ {
		mu.Lock()
		n := len(seqs)
		mu.Unlock()
		if n >= 6 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6]" {
		t.Fatalf("handled seqs %v, want [1 2 3 4 5 6]", seqs)
	}
}

// TestBackoffGrowsWhenServerClosesEachTime: a server that closes after
// every frame sees the wait grow to the maximum, never reset by the
// frames it sent; a connection that stayed up past StableAfter resets it.
func TestBackoffGrowsWhenServerClosesEachTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold time.Duration // how long the server keeps each connection
		grow bool
	}{
		{"closes at once", 0, true},
		{"stays past StableAfter", 60 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := wsServer(t, false, func(ctx context.Context, c *websocket.Conn, n int, _ *http.Request) {
				c.Write(ctx, websocket.MessageText, typing(1))
				time.Sleep(tc.hold)
				c.Close(websocket.StatusNormalClosure, "")
			})
			waits := make(chan time.Duration, 100)
			s := &Stream{Client: c, Log: slog.New(slog.DiscardHandler), OnEvent: func(context.Context, *Event) {},
				MinBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond, StableAfter: 30 * time.Millisecond}
			s.onWait = func(d time.Duration) { waits <- d }
			runIt(t, s)
			var got []time.Duration
			for len(got) < 6 {
				select {
				case d := <-waits:
					got = append(got, d)
				case <-time.After(20 * time.Second):
					t.Fatalf("only %d reconnects: %v", len(got), got)
				}
			}
			for i, d := range got {
				want := time.Millisecond
				if tc.grow {
					want = min(time.Millisecond<<i, 8*time.Millisecond)
				}
				if d != want {
					t.Fatalf("wait %d = %v, want %v (all: %v)", i, d, want, got)
				}
			}
		})
	}
}

// TestOutOfSequence: an event whose seq skips one ends the connection
// unhandled; the reconnect gets a new connection id, and the gap is
// handed to the worker after the events before it.
func TestOutOfSequence(t *testing.T) {
	asked := make(chan string, 10)
	c := wsServer(t, false, func(ctx context.Context, c *websocket.Conn, n int, r *http.Request) {
		if n == 1 {
			c.Write(ctx, websocket.MessageText, typing(1))
			c.Write(ctx, websocket.MessageText, typing(3)) // 2 never comes
		} else {
			select {
			case asked <- r.URL.Query().Get("connection_id"):
			default:
			}
		}
		<-ctx.Done()
	})
	var mu sync.Mutex
	var got []string
	s := &Stream{Client: c, Log: slog.New(slog.DiscardHandler), MinBackoff: time.Millisecond,
		OnEvent: func(_ context.Context, e *Event) { mu.Lock(); got = append(got, fmt.Sprint(e.Seq)); mu.Unlock() },
		OnGap:   func(context.Context) { mu.Lock(); got = append(got, "gap"); mu.Unlock() }}
	runIt(t, s)
	select {
	case id := <-asked:
		if id != "lost" {
			t.Fatalf("reconnect named connection %q, want lost (so the server starts a new one)", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reconnect after an out-of-sequence event")
	}
	for i := 0; i < 500; i++ {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let anything extra arrive
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[1 gap]" {
		t.Fatalf("handled %v, want [1 gap]", got)
	}
}

// posted is a posted event of post id in thread root ("" for a root).
func posted(seq int, id, root string) []byte {
	post, _ := json.Marshal(Post{ID: id, RootID: root, UserID: strings.Repeat("u", 26), ChannelID: strings.Repeat("c", 26), Message: "m"})
	data, _ := json.Marshal(map[string]string{"post": string(post), "channel_type": ChannelDirect})
	return fmt.Appendf(nil, `{"event":"posted","data":%s,"broadcast":{},"seq":%d}`, data, seq)
}

// TestSlowThreadDelaysOnlyItself: while thread A's handler blocks, a
// later event of thread B is handled; A's events are then handled in
// the order read, one at a time, and B's too.
func TestSlowThreadDelaysOnlyItself(t *testing.T) {
	a, b := strings.Repeat("a", 26), strings.Repeat("b", 26)
	id := func(c byte, i int) string { return strings.Repeat(string(c), 25) + strconv.Itoa(i) }
	c := wsServer(t, false, func(ctx context.Context, c *websocket.Conn, n int, _ *http.Request) {
		if n > 1 {
			t.Errorf("the stream reconnected (connection %d)", n)
			return
		}
		frames := [][]byte{posted(1, a, ""), posted(2, id('a', 1), a), posted(3, b, ""), posted(4, id('a', 2), a), posted(5, id('b', 1), b)}
		for _, f := range frames {
			if c.Write(ctx, websocket.MessageText, f) != nil {
				return
			}
		}
		<-ctx.Done()
	})
	release := make(chan struct{})
	bDone := make(chan struct{})
	var mu sync.Mutex
	var order []string
	var inA atomic.Int32
	s := &Stream{Client: c, Log: slog.New(slog.DiscardHandler),
		OnEvent: func(ctx context.Context, e *Event) {
			p, err := ParsePosted(e)
			if err != nil {
				t.Errorf("ParsePosted: %v", err)
				return
			}
			if p.Post.Thread() == a {
				if inA.Add(1) != 1 {
					t.Error("two of thread A's events were handled at once")
				}
				defer inA.Add(-1)
				if p.Post.ID == a {
					select { // the slow thread: blocked until B is answered
					case <-release:
					case <-ctx.Done():
					}
				}
			}
			mu.Lock()
			order = append(order, p.Post.ID)
			mu.Unlock()
			if p.Post.ID == id('b', 1) {
				close(bDone)
			}
		}}
	runIt(t, s)
	select {
	case <-bDone:
	case <-time.After(10 * time.Second):
		t.Fatal("thread B's events waited for thread A's blocked handler")
	}
	close(release)
	waitLen := func() int { mu.Lock(); defer mu.Unlock(); return len(order) }
	for i := 0; waitLen() < 5 && i < 1000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	want := fmt.Sprint([]string{b, id('b', 1), a, id('a', 1), id('a', 2)})
	if fmt.Sprint(order) != want {
		t.Fatalf("handled %v, want %v", order, want)
	}
}
