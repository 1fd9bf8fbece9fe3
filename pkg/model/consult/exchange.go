package consult

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// Caps on what is kept of a response.
const (
	MaxLine      = 1 << 20   // one line of the event stream
	MaxContent   = 256 << 10 // the answer
	MaxReasoning = 512 << 10 // the reasoning
	maxErrorBody = 4 << 10   // the body of a refusal (not 200)
)

// Answer is what a consult brought back. The toolkit prints it as one
// JSON object; brokerd logs it whole and shows the model Content only.
type Answer struct {
	Status    int    `json:"status"`    // the HTTP status
	Content   string `json:"content"`   // the answer
	Reasoning string `json:"reasoning"` // the remote model's reasoning, kept apart
	Finish    string `json:"finish"`    // the last finish_reason ("" if none came)
	Truncated bool   `json:"truncated"` // content or reasoning hit its cap; reading stopped there
	// StreamBytes and StreamSHA256 name every byte of the response body
	// as it arrived.
	StreamBytes  int64  `json:"stream_bytes"`
	StreamSHA256 string `json:"stream_sha256"`
}

// Result is what the toolkit's consult prints on stdout, one JSON
// object, whenever it tried the endpoint: the answer (or what arrived of
// it) and, if the call failed, why. brokerd logs it whole in the consult
// log and shows the model the answer's content only.
type Result struct {
	Answer Answer `json:"answer"`
	Error  string `json:"error,omitempty"`
}

// The ways a consult fails, each ending with its runbook entry.
var (
	ErrStalled   = errors.New("consult: the endpoint sent no byte within the liveness limit, so the call was stopped; see docs/runbook.md#consult-stalled")
	ErrUnbounded = errors.New("consult: the answer did not end within the total bound, so the call was stopped; see docs/runbook.md#consult-unbounded")
	ErrCut       = errors.New("consult: the stream ended without its [DONE] event; see docs/runbook.md#consult-failed")
)

// RemoteError is an error the endpoint reported: a status other than 200
// before the stream, or an error event in it. Msg is the endpoint's own
// text, one line, capped.
type RemoteError struct {
	Status int
	Msg    string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("consult: the endpoint answered %d: %s; see docs/runbook.md#consult-failed", e.Status, e.Msg)
}

// Exchange sends call.Body to call.URL with key as the bearer token and
// reads the streamed answer. client carries the connection (the toolkit's
// goes through the call's egress proxy and verifies TLS itself); it must
// not retry. The partial answer comes back with an error too, for the log.
func Exchange(ctx context.Context, client *http.Client, call toolargs.ConsultCall, key string) (Answer, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	total := time.AfterFunc(time.Duration(call.TotalMS)*time.Millisecond, func() { cancel(ErrUnbounded) })
	defer total.Stop()
	idle := time.Duration(call.IdleMS) * time.Millisecond
	live := time.AfterFunc(idle, func() { cancel(ErrStalled) })
	defer live.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.URL.String(), strings.NewReader(call.Body))
	if err != nil {
		return Answer{}, fmt.Errorf("consult: %v; see docs/runbook.md#consult-failed", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("User-Agent", "boxmaker-toolkit/1")
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, failure(ctx, err)
	}
	defer resp.Body.Close()
	live.Reset(idle)
	h := sha256.New()
	body := &watched{r: resp.Body, h: h, live: live, idle: idle}
	a := Answer{Status: resp.StatusCode}
	defer func() { a.StreamBytes, a.StreamSHA256 = body.n, hex.EncodeToString(h.Sum(nil)) }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
		a.StreamBytes, a.StreamSHA256 = body.n, hex.EncodeToString(h.Sum(nil))
		return a, &RemoteError{resp.StatusCode, errorText(b)}
	}
	err = readStream(body, &a)
	a.StreamBytes, a.StreamSHA256 = body.n, hex.EncodeToString(h.Sum(nil))
	if err != nil {
		return a, failure(ctx, err)
	}
	return a, nil
}

// failure names why the exchange stopped: the liveness or total limit
// when one fired (the transport's own error only says "canceled").
func failure(ctx context.Context, err error) error {
	if c := context.Cause(ctx); errors.Is(c, ErrStalled) || errors.Is(c, ErrUnbounded) {
		return c
	}
	var re *RemoteError
	if errors.As(err, &re) || errors.Is(err, ErrCut) {
		return err
	}
	return fmt.Errorf("consult: %s; see docs/runbook.md#consult-failed", oneLine(err.Error()))
}

// watched counts and hashes the body and restarts the liveness timer on
// every byte that arrives.
type watched struct {
	r    io.Reader
	h    io.Writer
	live *time.Timer
	idle time.Duration
	n    int64
}

func (w *watched) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.live.Reset(w.idle)
		w.h.Write(p[:n])
		w.n += int64(n)
	}
	return n, err
}

// chunk is the part of a streamed chunk a consult reads. Decoding is
// lenient on purpose: an OpenAI-compatible server adds fields of its own
// (id, usage, timings, ...), and none of them is acted on.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// readStream reads the event stream into a until [DONE]. Lines end in LF
// or CRLF; ":" lines are comments (pings); "data:" lines of one event
// are joined with LF; other fields are ignored.
func readStream(r io.Reader, a *Answer) error {
	var st stream
	defer func() { a.Content, a.Reasoning = st.content.String(), st.reasoning.String() }()
	return st.read(r, a)
}

// stream holds an answer as it grows (a builder each: appending to a
// string per token would copy it every time).
type stream struct {
	content, reasoning strings.Builder
}

func (st *stream) read(r io.Reader, a *Answer) error {
	br := bufio.NewReaderSize(r, 32<<10)
	var data []byte
	has := false
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return ErrCut
			}
			return err
		}
		switch {
		case len(line) == 0:
			if !has {
				continue
			}
			done, err := st.event(data, a)
			if err != nil || done {
				return err
			}
			data, has = data[:0], false
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) != "data" {
				continue
			}
			if has {
				data = append(data, '\n')
			}
			if len(data)+len(value) > MaxLine {
				return fmt.Errorf("an event of the stream is over %d bytes", MaxLine)
			}
			data, has = append(data, value...), true
		}
	}
}

// readLine reads one line without its ending, refusing one over MaxLine
// before it is buffered whole.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > MaxLine+2 {
			return nil, fmt.Errorf("a line of the stream is over %d bytes", MaxLine)
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		return bytes.TrimSuffix(line, []byte("\r")), nil
	}
}

// event applies one event's data; done is true at [DONE] or at a cap.
func (st *stream) event(data []byte, a *Answer) (done bool, err error) {
	if string(data) == "[DONE]" {
		return true, nil
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, fmt.Errorf("an event of the stream is not JSON: %v", err)
	}
	if c.Error != nil {
		return false, &RemoteError{a.Status, oneLine(c.Error.Message)}
	}
	for _, ch := range c.Choices {
		if st.content.Len()+len(ch.Delta.Content) > MaxContent || st.reasoning.Len()+len(ch.Delta.ReasoningContent) > MaxReasoning {
			cut(&st.content, ch.Delta.Content, MaxContent)
			cut(&st.reasoning, ch.Delta.ReasoningContent, MaxReasoning)
			a.Truncated = true
			return true, nil
		}
		st.content.WriteString(ch.Delta.Content)
		st.reasoning.WriteString(ch.Delta.ReasoningContent)
		if ch.FinishReason != nil {
			a.Finish = *ch.FinishReason
		}
	}
	return false, nil
}

// cut adds as much of s to b as fits under limit, on a rune boundary.
func cut(b *strings.Builder, s string, limit int) {
	if room := limit - b.Len(); room > 0 {
		s, _ = truncate.Bytes(s, room)
		b.WriteString(s)
	}
}

// errorText is the message of a refusal's body: error.message if it is
// OpenAI's error object, else the body itself, one line.
func errorText(b []byte) string {
	var env struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error != nil && env.Error.Message != "" {
		return oneLine(env.Error.Message)
	}
	return oneLine(string(b))
}

func oneLine(s string) string {
	return truncate.Ellipsis(escape.Line(strings.Join(strings.Fields(s), " ")), 500)
}
