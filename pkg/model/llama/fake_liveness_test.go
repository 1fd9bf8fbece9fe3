package llama_test

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
)

// The liveness tests run on a shared 2-core machine, so they assert only
// bounds that hold however late the scheduler runs anything: a limit did
// not fire before it was due, and it fired before the server would have
// resumed. Limits the test does not exercise are set to slack.
const slack = 30 * time.Second

// byteClock is a reverse proxy in front of a server that records when it
// last read response bytes from it. The client can only receive those bytes
// after the proxy read them, so "the client gave up at least d after
// lastByte" is a lower bound a client cannot meet early by luck.
type byteClock struct {
	last atomic.Int64 // UnixNano of the last read that returned bytes
}

// newByteClock returns a clock and the proxy's URL.
func newByteClock(t *testing.T, target string) (*byteClock, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	bc := &byteClock{}
	tr := &http.Transport{}
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = tr
	p.FlushInterval = -1
	p.ErrorLog = log.New(io.Discard, "", 0) // the client hanging up is expected
	p.ModifyResponse = func(r *http.Response) error {
		r.Body = clockedBody{r.Body, bc}
		return nil
	}
	hs := httptest.NewServer(p)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		tr.CloseIdleConnections()
	})
	return bc, hs.URL
}

func (bc *byteClock) lastByte() time.Time { return time.Unix(0, bc.last.Load()) }

type clockedBody struct {
	io.ReadCloser
	bc *byteClock
}

func (b clockedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.bc.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func livenessError(t *testing.T, err error) *llama.LivenessError {
	t.Helper()
	var le *llama.LivenessError
	if !errors.As(err, &le) {
		t.Fatalf("Complete: err = %v, want a *llama.LivenessError", err)
	}
	return le
}

func ask(text string) llama.Request {
	return llama.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: text}}}
}

// TestSilentMidStreamFails: a stream that delivers tokens for longer than
// the idle limit in total, then goes silent (no bytes, no pings), fails with
// the idle limit: not before the limit has passed since the last byte, and
// long before the server would have resumed.
func TestSilentMidStreamFails(t *testing.T) {
	const (
		idle  = 300 * time.Millisecond
		stall = 3 * time.Second
	)
	srv := fake.New(t, fake.Options{PingInterval: -1})
	clock, proxy := newByteClock(t, srv.URL())
	// Generated tokens: "\n</think>\n\n" (4), then the content's pieces.
	// The stall comes after 4+12 tokens, i.e. after "alpha ... zeta ",
	// and 15 token delays of 50 ms: more than twice the idle limit.
	srv.Script(fake.Reply{
		Content:    "alpha beta gamma delta epsilon zeta eta theta",
		TokenDelay: 50 * time.Millisecond,
		StallAfter: 16,
		Stall:      stall,
	})
	c, err := llama.New(llama.Config{
		BaseURL: proxy, Model: fakeModel,
		IdleTimeout: idle, FirstByteTimeout: slack, ModelLoadTimeout: slack,
	})
	if err != nil {
		t.Fatal(err)
	}
	var content strings.Builder
	req := ask("Tell me the Greek letters.")
	req.OnEvent = func(ev llama.Event) {
		if ev.Kind == llama.EventContent {
			content.WriteString(ev.Text)
		}
	}
	_, err = c.Complete(t.Context(), req, llama.SlotState{})
	failedAt := time.Now()
	le := livenessError(t, err)
	if le.Kind != llama.LimitIdle || le.Limit != idle || le.Silence < idle {
		t.Errorf("LivenessError kind %v, limit %v, silence %v, want the idle limit %v after a silence at least that long", le.Kind, le.Limit, le.Silence, idle)
	}
	// Everything before the stall arrived: the limit counts from the last
	// byte, not from the start of the stream.
	if got, want := content.String(), "alpha beta gamma delta epsilon zeta "; got != want {
		t.Errorf("content before the failure = %q, want %q", got, want)
	}
	since := failedAt.Sub(clock.lastByte())
	if since < idle {
		t.Errorf("Complete failed %v after the last byte, before the idle limit %v", since, idle)
	}
	if since >= 8*idle {
		t.Errorf("Complete failed %v after the last byte, want well under %v (idle limit %v)", since, 8*idle, idle)
	}
}

// TestFakeSlowStreamNeverFails: a stream that takes several idle limits in
// total but is never silent for one succeeds, whether the bytes are tokens
// or SSE pings during a slow prompt. (TestSlowStreamNeverFails is the
// in-package test of the same guarantee on canned bytes.)
func TestFakeSlowStreamNeverFails(t *testing.T) {
	// A six-fold margin over the longest gap (pings every 100 ms), so a
	// loaded machine's scheduling hiccups do not fail it.
	const idle = 600 * time.Millisecond
	words := strings.Fields("one two three four five six seven eight nine ten eleven twelve thirteen")
	tests := []struct {
		name    string
		ping    time.Duration
		reply   fake.Reply
		atLeast time.Duration // how long the stream takes at the least
	}{
		{
			// 4 markup tokens, 25 content pieces and <|im_end|>: 29 delays.
			name:    "tokens every 50ms",
			ping:    -1,
			reply:   fake.Reply{Content: strings.Join(words, " "), TokenDelay: 50 * time.Millisecond},
			atLeast: 29 * 50 * time.Millisecond,
		},
		{
			// One prompt batch: 1.5 s with only a ping every 100 ms.
			name:    "pings during a slow prompt",
			ping:    100 * time.Millisecond,
			reply:   fake.Reply{Content: strings.Join(words, " "), BatchDelay: 1500 * time.Millisecond},
			atLeast: 1500 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.New(t, fake.Options{PingInterval: tt.ping})
			srv.Script(tt.reply)
			c := newFakeClient(t, srv, llama.Config{IdleTimeout: idle, FirstByteTimeout: slack, ModelLoadTimeout: slack})
			start := time.Now()
			comp, err := c.Complete(t.Context(), ask("Count slowly."), llama.SlotState{})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("Complete failed after %v: %v", elapsed, err)
			}
			if elapsed < tt.atLeast || elapsed < 2*idle {
				t.Fatalf("stream took %v, want at least %v and 2 idle limits: the test no longer tests anything", elapsed, tt.atLeast)
			}
			if comp.Message.Content != tt.reply.Content || comp.FinishReason != "stop" {
				t.Errorf("Content = %q, finish %q, want %q and stop", comp.Message.Content, comp.FinishReason, tt.reply.Content)
			}
		})
	}
}

// TestQueuedRequestFirstByteLimit: a request pinned to a slot that another
// client is using receives nothing until that slot frees. The client asks
// /slots, sees the slot busy, and applies the first-byte limit: it fails
// when that limit is shorter than the wait, and succeeds after the other
// request when it is longer, even if the model-load limit is short. With
// the model unloaded instead, the model-load limit applies.
func TestQueuedRequestFirstByteLimit(t *testing.T) {
	const short = 300 * time.Millisecond
	tests := []struct {
		name      string
		unload    bool          // unload the model instead of occupying the slot
		firstByte time.Duration // the queued request's limits
		modelLoad time.Duration
		wantKind  llama.LimitKind // 0: the request succeeds
	}{
		{"busy slot, short first-byte limit", false, short, short, llama.LimitFirstByte},
		{"busy slot, first-byte limit longer than the wait", false, slack, short, 0},
		{"model loading, short model-load limit", true, slack, short, llama.LimitModelLoad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.New(t, fake.Options{Slots: 2, LoadTime: 3 * time.Second, PingInterval: -1})
			// The first request holds slot 0 for about 3 s: 4 markup
			// tokens, 11 content pieces and <|im_end|>, 200 ms apart.
			srv.Script(
				fake.Reply{Content: "a b c d e f", TokenDelay: 200 * time.Millisecond},
				fake.Reply{Content: "Served after the wait."},
			)
			var wg sync.WaitGroup
			var firstErr error
			// Cleanups run after t.Context is cancelled: the first request
			// then ends at once, and must end before the test does.
			t.Cleanup(wg.Wait)
			if tt.unload {
				srv.Unload()
			} else {
				first := newFakeClient(t, srv, llama.Config{IDSlot: 0, IdleTimeout: slack})
				started := make(chan struct{})
				var once sync.Once
				req := ask("Take your time.")
				req.OnEvent = func(llama.Event) { once.Do(func() { close(started) }) }
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, firstErr = first.Complete(t.Context(), req, llama.SlotState{})
				}()
				select {
				case <-started: // it holds the slot
				case <-time.After(slack):
					t.Fatal("the first request never started")
				}
			}

			c := newFakeClient(t, srv, llama.Config{IDSlot: 0, FirstByteTimeout: tt.firstByte, ModelLoadTimeout: tt.modelLoad, IdleTimeout: slack})
			start := time.Now()
			comp, err := c.Complete(t.Context(), ask("Me next."), llama.SlotState{})
			elapsed := time.Since(start)
			wg.Wait()
			if firstErr != nil {
				t.Errorf("first request: Complete: %v", firstErr)
			}
			if tt.wantKind == 0 {
				if err != nil {
					t.Fatalf("queued request failed after %v: %v", elapsed, err)
				}
				if comp.Message.Content != "Served after the wait." {
					t.Errorf("queued request got %q, want the second scripted reply", comp.Message.Content)
				}
				return
			}
			le := livenessError(t, err)
			limit := tt.firstByte
			if tt.wantKind == llama.LimitModelLoad {
				limit = tt.modelLoad
			}
			if le.Kind != tt.wantKind || le.Limit != limit {
				t.Errorf("LivenessError kind %v, limit %v, want %v of %v", le.Kind, le.Limit, tt.wantKind, limit)
			}
			if elapsed < limit || le.Silence < limit {
				t.Errorf("queued request failed after %v (silence %v), before its limit %v", elapsed, le.Silence, limit)
			}
		})
	}
}
