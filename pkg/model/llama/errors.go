package llama

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ServerError is llama-server's own error object, from a non-2xx response or
// from a mid-stream error event. The shape is the same in both places:
// {"error":{"code":N,"message":"...","type":"..."}}.
//
// reference: server-common.cpp:19-60 (shape), server-task.cpp:1501-1508
// (n_prompt_tokens and n_ctx inside the error object for
// exceed_context_size_error).
type ServerError struct {
	Op        string // the client operation, e.g. "chat completion"
	Status    int    // HTTP status of the response (200 for a mid-stream error)
	MidStream bool   // the error arrived as an SSE event after the stream began

	Code    int    // error.code; the HTTP status the server meant
	Type    string // error.type, e.g. "exceed_context_size_error"
	Message string // error.message, or the start of a body that was not JSON

	// Set only for exceed_context_size_error: the prompt's size and the
	// slot's context, so the caller can decide to compact.
	NPromptTokens int
	NCtx          int
}

// Error types llama-server uses (reference: server-common.cpp:19-60).
const (
	ErrorTypeInvalidRequest = "invalid_request_error"
	ErrorTypeUnavailable    = "unavailable_error"
	ErrorTypeServer         = "server_error"
	ErrorTypeExceedContext  = "exceed_context_size_error"
)

func (e *ServerError) Error() string {
	where := fmt.Sprintf("status %d", e.Status)
	if e.MidStream {
		where = "mid-stream"
	}
	s := fmt.Sprintf("%s: server error (%s", e.Op, where)
	if e.Type != "" {
		s += ", " + e.Type
	}
	s += "): " + e.Message
	if e.Type == ErrorTypeExceedContext {
		s += fmt.Sprintf(" (n_prompt_tokens %d, n_ctx %d)", e.NPromptTokens, e.NCtx)
	}
	return s
}

// ExceedsContext reports whether the prompt did not fit the slot's context.
func (e *ServerError) ExceedsContext() bool { return e.Type == ErrorTypeExceedContext }

// errorObject is the inside of {"error":{...}}.
type errorObject struct {
	Code          int    `json:"code"`
	Message       string `json:"message"`
	Type          string `json:"type"`
	NPromptTokens int    `json:"n_prompt_tokens"`
	NCtx          int    `json:"n_ctx"`
}

func (o *errorObject) serverError(op string, status int, midStream bool) *ServerError {
	return &ServerError{
		Op: op, Status: status, MidStream: midStream,
		Code: o.Code, Type: o.Type, Message: o.Message,
		NPromptTokens: o.NPromptTokens, NCtx: o.NCtx,
	}
}

// maxErrorText bounds how much of a non-JSON error body reaches an error
// string: the body is attacker-influenced and errors end up in logs.
const maxErrorText = 200

// parseErrorBody turns a non-2xx response body into a ServerError. A body that
// is not the server's error shape (a proxy's HTML page, say) still gives one,
// with the status as its code and a printable prefix of the body as message.
func parseErrorBody(op string, status int, body []byte) *ServerError {
	var env struct {
		Error *errorObject `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Message != "" {
		return env.Error.serverError(op, status, false)
	}
	return &ServerError{Op: op, Status: status, Code: status, Message: printable(body, maxErrorText)}
}

// printable returns at most n bytes of b as a single line of valid UTF-8.
func printable(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// StreamErrorKind says how a completion stream broke the protocol. It is an
// append-only enum.
type StreamErrorKind int

const (
	// StreamTruncated: the stream ended without [DONE] and without an error
	// event, e.g. the connection dropped.
	StreamTruncated StreamErrorKind = iota + 1
	// StreamTooLarge: an SSE line or event exceeded Config.MaxEventBytes.
	StreamTooLarge
	// StreamInvalid: an event was not a chunk, or the chunks contradicted
	// the protocol (tool call index skipping ahead, a second id, ...).
	StreamInvalid
)

func (k StreamErrorKind) String() string {
	switch k {
	case StreamTruncated:
		return "truncated stream"
	case StreamTooLarge:
		return "oversized event"
	case StreamInvalid:
		return "invalid stream"
	}
	return fmt.Sprintf("StreamErrorKind(%d)", int(k))
}

// StreamError is a completion stream the client refused. Event is the 1-based
// number of the SSE event where it was noticed (0 if before any event).
type StreamError struct {
	Kind  StreamErrorKind
	Event int
	Msg   string
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("chat completion: %s at event %d: %s", e.Kind, e.Event, e.Msg)
}

// LimitKind names one of the liveness limits. It is an append-only enum.
type LimitKind int

const (
	// LimitFirstByte is the wait for a busy slot before the first byte
	// (Config.FirstByteTimeout).
	LimitFirstByte LimitKind = iota + 1
	// LimitModelLoad is the wait for a model load before the first byte
	// (Config.ModelLoadTimeout).
	LimitModelLoad
	// LimitIdle is the silence allowed after the first byte
	// (Config.IdleTimeout).
	LimitIdle
)

func (k LimitKind) String() string {
	switch k {
	case LimitFirstByte:
		return "first-byte limit"
	case LimitModelLoad:
		return "model-load limit"
	case LimitIdle:
		return "idle limit"
	}
	return fmt.Sprintf("LimitKind(%d)", int(k))
}

// LivenessError is a request the client abandoned because the server sent no
// bytes for longer than one of the liveness limits.
type LivenessError struct {
	Op      string
	Kind    LimitKind
	Limit   time.Duration // the configured limit that fired
	Silence time.Duration // how long no byte had arrived when it fired
}

func (e *LivenessError) Error() string {
	what := "no bytes"
	if e.Kind != LimitIdle {
		what = "no first byte"
	}
	return fmt.Sprintf("%s: %s for %v (%s %v)", e.Op, what, e.Silence.Round(time.Millisecond), e.Kind, e.Limit)
}
