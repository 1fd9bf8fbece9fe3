package llama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// splitEvents cuts a transcript into its events (each with its "\n\n").
func splitEvents(data []byte) [][]byte {
	var evs [][]byte
	for len(data) > 0 {
		i := bytes.Index(data, []byte("\n\n"))
		if i < 0 {
			evs = append(evs, data)
			break
		}
		evs = append(evs, data[:i+2])
		data = data[i+2:]
	}
	return evs
}

// writeSSE writes a transcript event by event, flushing each, as the server
// does; between is called after each event (may be nil).
func writeSSE(w http.ResponseWriter, data []byte, between func(i int)) {
	w.Header().Set("Content-Type", "text/event-stream") // ignored if already written
	f := w.(http.Flusher)
	for i, ev := range splitEvents(data) {
		if _, err := w.Write(ev); err != nil {
			return
		}
		f.Flush()
		if between != nil {
			between(i)
		}
	}
}

// recorder keeps the bodies of requests a test server received.
type recorder struct {
	mu     sync.Mutex
	bodies map[string][][]byte
	urls   map[string][]string
}

func (r *recorder) record(req *http.Request) []byte {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bodies == nil {
		r.bodies, r.urls = map[string][][]byte{}, map[string][]string{}
	}
	r.bodies[req.URL.Path] = append(r.bodies[req.URL.Path], b)
	r.urls[req.URL.Path] = append(r.urls[req.URL.Path], req.URL.String())
	return b
}

func (r *recorder) get(path string) ([][]byte, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies[path]...), append([]string(nil), r.urls[path]...)
}

func newTestClient(t *testing.T, h http.Handler, cfg Config) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL
	if cfg.Model == "" {
		cfg.Model = "ornith"
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var userTurn = Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}

func TestCompleteGolden(t *testing.T) {
	var rec recorder
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		writeSSE(w, readGolden(t, "reasoning_content.sse"), nil)
	})
	c := newTestClient(t, mux, Config{IDSlot: 1, Sampling: &Sampling{Temperature: 0.7, TopP: 0.8, TopK: 5}, MaxTokens: 100})
	got, err := c.Complete(context.Background(), userTurn, SlotState{Total: 1101})
	if err != nil {
		t.Fatal(err)
	}
	want := *goldenWants[0].want
	want.CacheGap = 1
	want.Slot = SlotState{Total: 1221}
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("Complete =\n%+v\nwant\n%+v", got, &want)
	}

	bodies, _ := rec.get("/v1/chat/completions")
	if len(bodies) != 1 {
		t.Fatalf("%d requests, want 1", len(bodies))
	}
	var body map[string]any
	if err := json.Unmarshal(bodies[0], &body); err != nil {
		t.Fatal(err)
	}
	wantFields := map[string]any{
		"model": "ornith", "stream": true, "return_progress": true, "reasoning_control": true,
		"stream_options": map[string]any{"include_usage": true},
		"id_slot":        1.0, "temperature": 0.7, "top_p": 0.8, "top_k": 5.0, "max_tokens": 100.0,
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
	}
	if !reflect.DeepEqual(body, wantFields) {
		t.Fatalf("request body = %v, want %v", body, wantFields)
	}
}

func TestCompleteUnixSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "llama-test.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("unix sockets unavailable: %v", err)
	}
	hosts := make(chan string, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		writeSSE(w, readGolden(t, "tool_call.sse"), nil)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	c, err := New(Config{SocketPath: path, Model: "ornith"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Complete(context.Background(), userTurn, SlotState{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Message, goldenWants[1].want.Message) {
		t.Fatalf("message = %+v", got.Message)
	}
	if h := <-hosts; h != "llama-server.invalid" {
		t.Fatalf("Host = %q, want the placeholder", h)
	}
}

func TestCompleteErrors(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		check   func(error) bool
		prefix  string
	}{
		{
			name: "exceeds context",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				w.Write(readGolden(t, "exceed_context.json"))
			},
			check: func(err error) bool {
				var se *ServerError
				return errors.As(err, &se) && se.ExceedsContext() && se.Status == 400 && se.Code == 400 &&
					se.NPromptTokens == 6047 && se.NCtx == 2048 && !se.MidStream &&
					strings.Contains(se.Message, "exceeds the available context size")
			},
			prefix: "chat completion: server error (status 400, exceed_context_size_error): request (6047 tokens)",
		},
		{
			name: "loading",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(503)
				w.Write(readGolden(t, "loading.json"))
			},
			check: func(err error) bool {
				var se *ServerError
				return errors.As(err, &se) && se.Code == 503 && se.Type == ErrorTypeUnavailable && se.Message == "Loading model"
			},
			prefix: "chat completion: server error (status 503, unavailable_error): Loading model",
		},
		{
			name: "not json",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(502)
				w.Write([]byte("<html>\n<b>Bad Gateway</b>\x00</html>"))
			},
			check: func(err error) bool {
				var se *ServerError
				return errors.As(err, &se) && se.Code == 502 && se.Type == "" && se.Message == "<html> <b>Bad Gateway</b> </html>"
			},
			prefix: "chat completion: server error (status 502): <html>",
		},
		{
			name: "redirect refused",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "http://example.invalid/", http.StatusFound)
			},
			check: func(err error) bool {
				var se *ServerError
				return errors.As(err, &se) && se.Status == 302
			},
			prefix: "chat completion: server error (status 302)",
		},
		{
			name: "mid-stream error",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeSSE(w, readGolden(t, "midstream_error.sse"), nil)
			},
			check: func(err error) bool {
				var se *ServerError
				return errors.As(err, &se) && se.MidStream && se.Status == 200 && se.Type == ErrorTypeServer
			},
			prefix: "chat completion: server error (mid-stream, server_error): Unexpected error",
		},
		{
			name: "truncated",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeSSE(w, readGolden(t, "truncated.sse"), nil)
			},
			check: func(err error) bool {
				var se *StreamError
				return errors.As(err, &se) && se.Kind == StreamTruncated
			},
			prefix: "chat completion: truncated stream at event 3",
		},
		{
			name: "connection cut mid-event",
			handler: func(w http.ResponseWriter, r *http.Request) {
				// Read the whole request first: a server that closes on an
				// unread body resets the connection, and the client would see
				// the reset (flaky under load), not the cut stream under test.
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Content-Length", "1000")
				w.Write([]byte("data: {\"id\":\"x\""))
			},
			check: func(err error) bool {
				var se *StreamError
				return errors.As(err, &se) && se.Kind == StreamTruncated
			},
			prefix: "chat completion: truncated stream at event 0",
		},
		{
			name: "not a stream",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"choices":[]}`))
			},
			check:  func(err error) bool { return err != nil },
			prefix: `chat completion: response content type "application/json" is not an event stream`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, tt.handler, Config{})
			got, err := c.Complete(context.Background(), userTurn, SlotState{})
			if got != nil || !tt.check(err) {
				t.Fatalf("Complete = %v, %v", got, err)
			}
			if !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Fatalf("error %q, want prefix %q", err, tt.prefix)
			}
		})
	}
}

func TestCompleteNoMessages(t *testing.T) {
	c := newTestClient(t, http.NotFoundHandler(), Config{})
	if _, err := c.Complete(context.Background(), Request{}, SlotState{}); err == nil {
		t.Fatal("Complete without messages succeeded")
	}
}

func TestCompleteCallerCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, []byte(deltaLine(`{"content":"a"}`)), nil)
		cancel()
		hang(r)
	}), Config{})
	_, err := c.Complete(ctx, userTurn, SlotState{})
	var le *LivenessError
	if !errors.Is(err, context.Canceled) || errors.As(err, &le) {
		t.Fatalf("Complete after cancel = %v, want context.Canceled", err)
	}
}

func TestCacheAccounting(t *testing.T) {
	tests := []struct {
		name     string
		prev     SlotState
		timings  *Timings
		wantGap  int
		wantLoss *CacheLoss
		wantSlot SlotState
	}{
		{"unknown previous", SlotState{}, &Timings{CacheN: 0, PromptN: 134, PredictedN: 10}, 0, nil, SlotState{144}},
		{"exact continuation", SlotState{134}, &Timings{CacheN: 134, PromptN: 20, PredictedN: 5}, 0, nil, SlotState{159}},
		{"last token uncached", SlotState{134}, &Timings{CacheN: 133, PromptN: 117, PredictedN: 1}, 1, nil, SlotState{251}},
		{"re-rendered reply", SlotState{368}, &Timings{CacheN: 328, PromptN: 60, PredictedN: 7}, 40, &CacheLoss{Tokens: 40, PrevTotal: 368, Cached: 328}, SlotState{395}},
		{"full loss", SlotState{5000}, &Timings{CacheN: 0, PromptN: 5100, PredictedN: 3}, 5000, &CacheLoss{Tokens: 5000, PrevTotal: 5000, Cached: 0}, SlotState{5103}},
		{"more cached than before", SlotState{100}, &Timings{CacheN: 120, PromptN: 5}, -20, nil, SlotState{125}},
		{"no timings", SlotState{100}, nil, 0, nil, SlotState{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Completion{Timings: tt.timings}
			c.account(tt.prev)
			if c.CacheGap != tt.wantGap || !reflect.DeepEqual(c.CacheLoss, tt.wantLoss) || c.Slot != tt.wantSlot {
				t.Fatalf("account(%v) = gap %d loss %+v slot %v; want %d %+v %v", tt.prev, c.CacheGap, c.CacheLoss, c.Slot, tt.wantGap, tt.wantLoss, tt.wantSlot)
			}
		})
	}
}

// TestCacheAcrossTurns runs two completions, feeding the first's Slot into
// the second, against a server whose second reply reports a cache loss.
func TestCacheAcrossTurns(t *testing.T) {
	turn := 0
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		turn++
		timings := `{"cache_n":0,"prompt_n":134,"predicted_n":10}`
		if turn == 2 {
			timings = `{"cache_n":88,"prompt_n":100,"predicted_n":5}`
		}
		s := deltaLine(`{"content":"a"}`) + finishLine + chunkLine(`"choices":[],"timings":`+timings) + "data: [DONE]\n\n"
		writeSSE(w, []byte(s), nil)
	}), Config{})
	first, err := c.Complete(context.Background(), userTurn, SlotState{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Complete(context.Background(), userTurn, first.Slot)
	if err != nil {
		t.Fatal(err)
	}
	if first.CacheLoss != nil || second.CacheGap != 56 || second.CacheLoss == nil || second.CacheLoss.Tokens != 56 || second.Slot.Total != 193 {
		t.Fatalf("first %+v; second gap %d loss %+v slot %v", first, second.CacheGap, second.CacheLoss, second.Slot)
	}
}

func TestStreamDeliversEvents(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, readGolden(t, "pings_progress.sse"), nil)
	}), Config{})
	var progress []int
	req := userTurn
	req.OnEvent = func(ev Event) {
		if ev.Kind == EventProgress {
			progress = append(progress, ev.Progress.Processed)
		}
	}
	if _, err := c.Complete(context.Background(), req, SlotState{}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(progress, []int{8000, 8512, 9000}) {
		t.Fatalf("progress events = %v", progress)
	}
}
