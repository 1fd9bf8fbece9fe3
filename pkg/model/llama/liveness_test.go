package llama

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// generous is the upper bound on how late a limit may fire on a loaded CI
// machine; the tests assert on the kind of limit, not on exact timing.
const generous = 10 * time.Second

// hang blocks a handler until the client goes away. It reads the request
// body first: until then net/http cannot notice the client closing.
func hang(r *http.Request) {
	io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(2 * generous):
	}
}

func livenessErr(t *testing.T, err error) *LivenessError {
	t.Helper()
	var le *LivenessError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a *LivenessError", err)
	}
	return le
}

// TestIdleLimit: a stream that goes silent after some events fails with the
// idle limit, and not before the limit has passed since the last byte.
func TestIdleLimit(t *testing.T) {
	const idle = 200 * time.Millisecond
	lastWrite := make(chan time.Time, 1)
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, []byte(deltaLine(`{"role":"assistant","content":null}`)+deltaLine(`{"content":"a"}`)), nil)
		lastWrite <- time.Now()
		hang(r)
	}), Config{IdleTimeout: idle, FirstByteTimeout: generous, ModelLoadTimeout: generous})
	_, err := c.Complete(context.Background(), userTurn, SlotState{})
	failedAt := time.Now()
	le := livenessErr(t, err)
	if le.Kind != LimitIdle || le.Limit != idle || le.Silence < idle {
		t.Fatalf("LivenessError = %+v, want idle limit %v", le, idle)
	}
	if since := failedAt.Sub(<-lastWrite); since < idle || since > generous {
		t.Fatalf("failed %v after the last byte, want between %v and %v", since, idle, generous)
	}
	if !strings.HasPrefix(err.Error(), "chat completion: no bytes for ") || !strings.Contains(err.Error(), "idle limit 200ms") {
		t.Fatalf("error text %q", err)
	}
}

// TestSlowStreamNeverFails: bytes every 50 ms for far longer than the idle
// limit in total keep the stream alive; pings count as bytes.
func TestSlowStreamNeverFails(t *testing.T) {
	// Gaps of 50 ms against a 300 ms limit: a six-fold margin, so a
	// loaded machine's scheduling hiccups do not fail it.
	const idle = 300 * time.Millisecond
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for range 20 { // 1 s of pings only
			fmt.Fprint(w, ":\n\n")
			f.Flush()
			time.Sleep(50 * time.Millisecond)
		}
		writeSSE(w, readGolden(t, "pings_progress.sse"), func(int) { time.Sleep(50 * time.Millisecond) })
	}), Config{IdleTimeout: idle, FirstByteTimeout: generous, ModelLoadTimeout: generous})
	start := time.Now()
	got, err := c.Complete(context.Background(), userTurn, SlotState{})
	if err != nil {
		t.Fatalf("slow stream failed after %v: %v", time.Since(start), err)
	}
	if got.Message.Content != "pong" {
		t.Fatalf("content %q", got.Message.Content)
	}
	if d := time.Since(start); d < 3*idle {
		t.Fatalf("stream took %v; the test needs it to outlast the idle limit several times", d)
	}
}

// TestFirstByteLimits: a server that sends nothing (no headers either) is
// covered by the first-byte limits, classified by one /slots probe.
func TestFirstByteLimits(t *testing.T) {
	const idle = 100 * time.Millisecond
	tests := []struct {
		name      string
		slots     string // /slots answer; "" answers 503 loading
		firstByte time.Duration
		modelLoad time.Duration
		slot      int
		want      LimitKind
		wantLimit time.Duration
	}{
		{"busy slot", `[{"id":0,"is_processing":true},{"id":1,"is_processing":false}]`, 500 * time.Millisecond, 150 * time.Millisecond, 0, LimitFirstByte, 500 * time.Millisecond},
		{"idle slot is a model load", `[{"id":0,"is_processing":false},{"id":1,"is_processing":true}]`, 500 * time.Millisecond, 150 * time.Millisecond, 0, LimitModelLoad, 150 * time.Millisecond},
		{"slot id wraps", `[{"id":0,"is_processing":true},{"id":1,"is_processing":false}]`, 500 * time.Millisecond, 150 * time.Millisecond, 2, LimitFirstByte, 500 * time.Millisecond},
		{"slots unavailable", "", 500 * time.Millisecond, 150 * time.Millisecond, 0, LimitModelLoad, 150 * time.Millisecond},
		{"load limit longer than busy limit", `[{"id":0,"is_processing":false}]`, 150 * time.Millisecond, 400 * time.Millisecond, 0, LimitModelLoad, 400 * time.Millisecond},
		{"busy with load limit longer", `[{"id":0,"is_processing":true}]`, 150 * time.Millisecond, 400 * time.Millisecond, 0, LimitFirstByte, 150 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec recorder
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
				hang(r)
			})
			mux.HandleFunc("GET /slots", func(w http.ResponseWriter, r *http.Request) {
				rec.record(r)
				if tt.slots == "" {
					w.WriteHeader(503)
					w.Write(readGolden(t, "loading.json"))
					return
				}
				w.Write([]byte(tt.slots))
			})
			c := newTestClient(t, mux, Config{IDSlot: tt.slot, IdleTimeout: idle, FirstByteTimeout: tt.firstByte, ModelLoadTimeout: tt.modelLoad})
			start := time.Now()
			_, err := c.Complete(context.Background(), userTurn, SlotState{})
			elapsed := time.Since(start)
			le := livenessErr(t, err)
			if le.Kind != tt.want || le.Limit != tt.wantLimit || le.Silence < tt.wantLimit {
				t.Fatalf("LivenessError = %+v, want %v after %v", le, tt.want, tt.wantLimit)
			}
			if elapsed < tt.wantLimit || elapsed > generous {
				t.Fatalf("failed after %v, want at least %v", elapsed, tt.wantLimit)
			}
			_, urls := rec.get("/slots")
			if len(urls) != 1 || urls[0] != "/slots?autoload=false&model=ornith" {
				t.Fatalf("/slots probes = %v, want exactly one that cannot load the model", urls)
			}
			if !strings.Contains(err.Error(), "no first byte") {
				t.Fatalf("error text %q", err)
			}
		})
	}
}

// TestFirstByteWaitWithinLimit: a first byte that comes after longer than
// the idle limit, but within the first-byte limits, is fine.
func TestFirstByteWaitWithinLimit(t *testing.T) {
	var probes atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(400 * time.Millisecond)
		writeSSE(w, readGolden(t, "tool_call.sse"), nil)
	})
	mux.HandleFunc("GET /slots", func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		w.Write([]byte(`[{"id":0,"is_processing":true}]`))
	})
	c := newTestClient(t, mux, Config{IdleTimeout: 100 * time.Millisecond, ModelLoadTimeout: 200 * time.Millisecond, FirstByteTimeout: generous})
	if _, err := c.Complete(context.Background(), userTurn, SlotState{}); err != nil {
		t.Fatal(err)
	}
	if probes.Load() != 1 {
		t.Fatalf("%d /slots probes, want 1 (at the model-load limit)", probes.Load())
	}
}

// TestHeadersEndTheWait: the server flushes headers with its first result,
// so headers followed by silence are held to the idle limit.
func TestHeadersEndTheWait(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		hang(r)
	}), Config{IdleTimeout: 150 * time.Millisecond, FirstByteTimeout: generous, ModelLoadTimeout: generous})
	_, err := c.Complete(context.Background(), userTurn, SlotState{})
	if le := livenessErr(t, err); le.Kind != LimitIdle {
		t.Fatalf("LivenessError = %+v, want the idle limit", le)
	}
}

// TestEndpointLiveness: the small endpoints are held to the idle limit too.
func TestEndpointLiveness(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hang(r)
	}), Config{IdleTimeout: 150 * time.Millisecond})
	_, err := c.Props(context.Background())
	le := livenessErr(t, err)
	if le.Op != "props" || le.Limit != 150*time.Millisecond {
		t.Fatalf("LivenessError = %+v", le)
	}
	if !strings.HasPrefix(err.Error(), "props: no first byte for") {
		t.Fatalf("error text %q", err)
	}
}

// TestWatchdogStopIsFinal: a stopped watchdog never cancels with a cause.
func TestWatchdogStopIsFinal(t *testing.T) {
	w, ctx := startWatchdog(context.Background(), "op", limits{firstByte: 10 * time.Millisecond, modelLoad: 10 * time.Millisecond, idle: 10 * time.Millisecond})
	w.stop()
	time.Sleep(50 * time.Millisecond)
	if w.fired() != nil || !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("stopped watchdog fired: %v", context.Cause(ctx))
	}
}
