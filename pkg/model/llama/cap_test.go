package llama

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestThinkingCap: when the count of reasoning deltas reaches the cap the
// client sends reasoning_end once, while it keeps reading the stream.
func TestThinkingCap(t *testing.T) {
	const wantBody = `{"id":"` + testID + `","action":"reasoning_end","model":"ornith"}`
	tests := []struct {
		name     string
		cap      int
		answer   string // the control endpoint's reply
		fired    bool
		capErr   string // "" means CapErr must be nil
		controls int
	}{
		{"fires mid-reasoning", 5, `{"success":true}`, true, "", 1},
		{"fires on the last reasoning token", 12, `{"success":true}`, true, "", 1},
		{"one token short", 13, ``, false, "", 0},
		{"disabled", -1, ``, false, "", 0},
		{"server declines", 3, `{"success":false,"message":"reasoning control not enabled for this completion"}`, true, "reasoning control: server declined: \"reasoning control not enabled", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec recorder
			controlled := make(chan struct{}, 4)
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
				rec.record(r)
				// Events 0-2 are progress and role; reasoning delta n is
				// event n+2. After the delta that reaches the cap, hold
				// the stream until the control request has arrived: it
				// must come while the stream is still open.
				writeSSE(w, readGolden(t, "reasoning_content.sse"), func(i int) {
					if tt.fired && i == tt.cap+2 {
						select {
						case <-controlled:
						case <-time.After(generous):
							t.Error("no control request while the stream was open")
						}
					}
				})
			})
			mux.HandleFunc("POST /v1/chat/completions/control", func(w http.ResponseWriter, r *http.Request) {
				rec.record(r)
				controlled <- struct{}{}
				w.Write([]byte(tt.answer))
			})
			c := newTestClient(t, mux, Config{ThinkingCap: tt.cap})
			got, err := c.Complete(context.Background(), userTurn, SlotState{})
			if err != nil {
				t.Fatal(err)
			}
			if got.ReasoningTokens != 12 || got.CapFired != tt.fired {
				t.Fatalf("ReasoningTokens %d CapFired %v, want 12 %v", got.ReasoningTokens, got.CapFired, tt.fired)
			}
			if tt.capErr == "" && got.CapErr != nil || tt.capErr != "" && (got.CapErr == nil || !strings.HasPrefix(got.CapErr.Error(), tt.capErr)) {
				t.Fatalf("CapErr = %v, want %q", got.CapErr, tt.capErr)
			}
			bodies, _ := rec.get("/v1/chat/completions/control")
			if len(bodies) != tt.controls {
				t.Fatalf("%d control requests, want %d", len(bodies), tt.controls)
			}
			for _, b := range bodies {
				if strings.TrimSpace(string(b)) != wantBody {
					t.Fatalf("control body %s, want %s", b, wantBody)
				}
			}
			// The full reply is still there: the stream was read to the end.
			if got.Message.Content != goldenWants[0].want.Message.Content {
				t.Fatalf("content %q", got.Message.Content)
			}
		})
	}
}

// TestThinkingCapOncePerCompletion: the cap fires once per completion, and
// again on the next one.
func TestThinkingCapOncePerCompletion(t *testing.T) {
	var rec recorder
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, readGolden(t, "reasoning_content.sse"), nil)
	})
	mux.HandleFunc("POST /v1/chat/completions/control", func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		w.Write([]byte(`{"success":true}`))
	})
	c := newTestClient(t, mux, Config{ThinkingCap: 1})
	for i := 1; i <= 2; i++ {
		got, err := c.Complete(context.Background(), userTurn, SlotState{})
		if err != nil || !got.CapFired {
			t.Fatalf("completion %d: %v, %v", i, got, err)
		}
		if bodies, _ := rec.get("/v1/chat/completions/control"); len(bodies) != i {
			t.Fatalf("after completion %d: %d control requests", i, len(bodies))
		}
	}
}
