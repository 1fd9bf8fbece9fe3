package llama

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"time"
	"unicode/utf8"
)

// Synthetic speeds. Reference silent: the fake reports times computed from
// token counts instead of measuring, so transcripts are reproducible. The
// values are round numbers near the deployed model's measured 1,170 prompt
// tokens/s and 69 generated tokens/s (brief, "Target environment").
const (
	promptTokenMS = 1.0
	genTokenMS    = 15.0
)

// sse writes a text/event-stream response.
type sse struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	ctx  context.Context
	ping time.Duration // <= 0 disables pings
	last time.Time     // time of the last write
}

func newSSE(ctx context.Context, w http.ResponseWriter, ping time.Duration) *sse {
	return &sse{w: w, rc: http.NewResponseController(w), ctx: ctx, ping: ping}
}

// start sends the 200 headers and nothing else: the first internal result
// flushes only the headers when there is no progress to report
// (server-task.cpp:1028-1030, server-context.cpp:3291-3296).
func (e *sse) start() error {
	e.w.Header().Set("Content-Type", "text/event-stream")
	e.w.WriteHeader(http.StatusOK)
	return e.flush()
}

func (e *sse) flush() error {
	e.last = time.Now()
	return e.rc.Flush()
}

// events writes each payload as "data: <payload>\n\n", all in one write:
// a single write can carry several events (server-common.cpp:1584-1601).
func (e *sse) events(payloads ...[]byte) error {
	// A cancelled request (client gone, Unload, end of test) sends nothing
	// more; its handler then returns.
	if err := e.ctx.Err(); err != nil {
		return err
	}
	var b bytes.Buffer
	for _, p := range payloads {
		b.WriteString("data: ")
		b.Write(p)
		b.WriteString("\n\n")
	}
	if _, err := e.w.Write(b.Bytes()); err != nil {
		return err
	}
	return e.flush()
}

// sleep waits d. With pings set it sends the SSE comment ":\n\n" whenever
// the stream has been silent for the ping interval
// (server-context.cpp:4339: ping every sse_ping_interval).
func (e *sse) sleep(d time.Duration, pings bool) error {
	deadline := time.Now().Add(d)
	for {
		now := time.Now()
		if !now.Before(deadline) {
			return nil
		}
		wake := deadline
		pingDue := pings && e.ping > 0 && e.last.Add(e.ping).Before(deadline)
		if pingDue {
			wake = e.last.Add(e.ping)
		}
		timer := time.NewTimer(wake.Sub(now))
		select {
		case <-e.ctx.Done():
			timer.Stop()
			return e.ctx.Err()
		case <-timer.C:
		}
		if pingDue {
			if _, err := e.w.Write([]byte(":\n\n")); err != nil {
				return err
			}
			if err := e.flush(); err != nil {
				return err
			}
		}
	}
}

// wait is sleep until release is closed, with pings: one token that
// takes as long as the test wants.
func (e *sse) wait(release <-chan struct{}) error {
	for {
		var tick <-chan time.Time
		var timer *time.Timer
		if e.ping > 0 {
			timer = time.NewTimer(time.Until(e.last.Add(e.ping)))
			tick = timer.C
		}
		select {
		case <-release:
		case <-e.ctx.Done():
		case <-tick:
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-release:
			return nil
		case <-e.ctx.Done():
			return e.ctx.Err()
		default:
		}
		if e.ping > 0 && !time.Now().Before(e.last.Add(e.ping)) {
			if _, err := e.w.Write([]byte(":\n\n")); err != nil {
				return err
			}
			if err := e.flush(); err != nil {
				return err
			}
		}
	}
}

// chunk is the streaming envelope, keys in upstream order
// (server-task.cpp:1111-1162); usage, timings and prompt_progress follow
// when present (server-task.cpp:462-527, 242-249).
type chunk struct {
	Choices           []choice  `json:"choices"`
	Created           int64     `json:"created"`
	ID                string    `json:"id"`
	Model             string    `json:"model"`
	SystemFingerprint string    `json:"system_fingerprint"`
	Object            string    `json:"object"`
	Usage             *usage    `json:"usage,omitempty"`
	Timings           *timings  `json:"timings,omitempty"`
	PromptProgress    *progress `json:"prompt_progress,omitempty"`
}

type choice struct {
	FinishReason *string `json:"finish_reason"`
	Index        int     `json:"index"`
	Delta        any     `json:"delta"`
}

// Deltas carry only non-empty parts (server-chat.cpp:607-635).
type roleDelta struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
}

type reasoningDelta struct {
	ReasoningContent string `json:"reasoning_content"`
}

type contentDelta struct {
	Content string `json:"content"`
}

type toolDelta struct {
	ToolCalls []toolCallDelta `json:"tool_calls"`
}

// toolCallDelta: id and type appear only on the first fragment of an index
// (server-chat.cpp:607-635).
type toolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function functionDelta `json:"function"`
}

type functionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// usage copies server-task.cpp:365-372.
type usage struct {
	CompletionTokens    int           `json:"completion_tokens"`
	PromptTokens        int           `json:"prompt_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// progress copies prompt_progress (server-task.cpp:242-249): processed
// includes the cached tokens.
type progress struct {
	Total     int `json:"total"`
	Cache     int `json:"cache"`
	Processed int `json:"processed"`
	TimeMS    int `json:"time_ms"`
}

// timings copies server-common.cpp:67-88. draft_n and draft_n_accepted
// appear only with speculative decoding, which the fake never runs.
type timings struct {
	CacheN              int    `json:"cache_n"`
	PromptN             int    `json:"prompt_n"`
	PromptMS            jfloat `json:"prompt_ms"`
	PromptPerTokenMS    jfloat `json:"prompt_per_token_ms"`
	PromptPerSecond     jfloat `json:"prompt_per_second"`
	PredictedN          int    `json:"predicted_n"`
	PredictedMS         jfloat `json:"predicted_ms"`
	PredictedPerTokenMS jfloat `json:"predicted_per_token_ms"`
	PredictedPerSecond  jfloat `json:"predicted_per_second"`
}

// jfloat writes a non-finite value as null, as nlohmann's dump does. It
// happens when a count is zero. Reference silent on whether upstream guards
// those divisions; the fake does not.
type jfloat float64

func (f jfloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

// makeTimings computes timings. prompt_n counts only the newly processed
// prompt tokens (README.md:1415); generation rates divide by predicted_n-1
// because the first token comes out of the prompt batch
// (server-common.h:402-420), so predicted_ms covers the tokens after it.
func makeTimings(cacheN, promptN, predictedN int) *timings {
	pms := float64(promptN) * promptTokenMS
	after := float64(max(predictedN-1, 0))
	gms := after * genTokenMS
	return &timings{
		CacheN:              cacheN,
		PromptN:             promptN,
		PromptMS:            jfloat(pms),
		PromptPerTokenMS:    jfloat(pms / float64(promptN)),
		PromptPerSecond:     jfloat(1e3 / pms * float64(promptN)),
		PredictedN:          predictedN,
		PredictedMS:         jfloat(gms),
		PredictedPerTokenMS: jfloat(gms / after),
		PredictedPerSecond:  jfloat(1e3 / gms * after),
	}
}

// completeUTF8 drops a trailing incomplete UTF-8 sequence, which the server
// holds back until the rest of the character is generated
// (server-common.h validate_utf8).
func completeUTF8(s string) string {
	for i := 1; i <= utf8.UTFMax && i <= len(s); i++ {
		if utf8.RuneStart(s[len(s)-i]) {
			if !utf8.FullRuneInString(s[len(s)-i:]) {
				return s[:len(s)-i]
			}
			return s
		}
	}
	return s
}
