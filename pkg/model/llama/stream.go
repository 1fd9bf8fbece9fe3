package llama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// Usage is the usage object of the last chunk (stream_options.include_usage).
// reference: server-task.cpp:365-372.
type Usage struct {
	CompletionTokens    int                 `json:"completion_tokens"`
	PromptTokens        int                 `json:"prompt_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails PromptTokensDetails `json:"prompt_tokens_details"`
}

// PromptTokensDetails is usage.prompt_tokens_details.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Timings is the timings object of the last chunk. reference:
// server-common.cpp:67-88. The rates are floats and may be null (a division
// by zero on the server), which decodes as 0.
type Timings struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"` // only newly processed prompt tokens
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
	DraftN              int     `json:"draft_n,omitempty"` // only with speculative decoding
	DraftNAccepted      int     `json:"draft_n_accepted,omitempty"`
}

// ContextTokens is the context the slot holds after this completion:
// cache_n + prompt_n + predicted_n (reference: README.md:1415).
func (t Timings) ContextTokens() int { return t.CacheN + t.PromptN + t.PredictedN }

// PromptProgress is a prompt_progress object (return_progress). Processed
// includes the cached tokens. reference: server-task.cpp:242-249.
type PromptProgress struct {
	Total     int   `json:"total"`
	Cache     int   `json:"cache"`
	Processed int   `json:"processed"`
	TimeMS    int64 `json:"time_ms"`
}

// EventKind says what an [Event] carries.
type EventKind int

const (
	EventReasoning EventKind = iota + 1 // Text is a reasoning_content fragment
	EventContent                        // Text is a content fragment
	EventToolCall                       // Text is an arguments fragment of call ToolIndex
	EventProgress                       // Progress is set
)

// Event is one streamed fragment, passed to [Request.OnEvent] for display.
// The [Completion] holds the same data; events are not needed to build it.
type Event struct {
	Kind      EventKind
	Text      string
	ToolIndex int
	ToolName  string // set on the first fragment of a tool call
	Progress  PromptProgress
}

// Completion is the result of one streamed chat completion.
type Completion struct {
	ID                string // "chatcmpl-..."; one id for the whole stream
	Model             string
	SystemFingerprint string // "b<build>-<commit>"

	// Message is the assistant message exactly as streamed: each string is
	// the concatenation of its fragments. Store it and replay it unchanged.
	Message      chat.Message
	FinishReason string // "stop", "length" or "tool_calls"
	Usage        Usage
	Timings      *Timings       // nil if the server sent none
	Progress     PromptProgress // the last prompt_progress seen

	// ReasoningTokens counts reasoning_content deltas. The server sends one
	// delta per sampled token, so this is the number of reasoning tokens;
	// it can undercount only when the final flush carries several tokens
	// of leftover reasoning in one delta (reference: server-task.cpp:462-527).
	ReasoningTokens int
	// CapFired reports that ReasoningTokens reached the thinking cap and the
	// client sent reasoning_end. CapErr says why that request did not take
	// effect (transport error, or the server answered success:false), and
	// is nil if the server accepted it. The server accepts even when it
	// cannot act (reference: server-context.cpp:2361-2362), so a nil CapErr
	// does not prove the thinking block ended.
	CapFired bool
	CapErr   error
	// CapAt is the reasoning-token count at which the cap fired (the cap
	// in force), 0 when it did not fire. ReasoningTokens goes on past it
	// by what the server forces to close the block, or by the rest of the
	// thinking when the server could not act.
	CapAt int

	// Cache accounting against the SlotState passed in; see [SlotState].
	CacheGap  int
	CacheLoss *CacheLoss // nil unless CacheGap > 1
	Slot      SlotState  // pass to the next completion on this slot
}

// chunk is one chat.completion.chunk, or a mid-stream error. Decoding is
// lenient about fields the client does not use: servers add fields freely.
// reference: server-task.cpp:1111-1162.
type chunk struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []chunkChoice   `json:"choices"`
	Usage             *Usage          `json:"usage"`
	Timings           *Timings        `json:"timings"`
	PromptProgress    *PromptProgress `json:"prompt_progress"`
	Error             *errorObject    `json:"error"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	FinishReason *string    `json:"finish_reason"`
	Delta        chunkDelta `json:"delta"`
}

// chunkDelta holds only non-empty parts (reference: server-chat.cpp:607-635);
// the role delta carries "content":null, which decodes as "".
type chunkDelta struct {
	Role             string          `json:"role"`
	Content          string          `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

// toolCallDelta is one tool call fragment. id, type and function.name come
// only on the first fragment of an index; later ones carry arguments only.
// reference: server-chat.cpp:607-635, common/chat.cpp:266-330.
type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type toolCallAcc struct {
	id, name string
	args     []byte
}

// accumulator folds chunks into a Completion. It does no I/O: the thinking
// cap and events are callbacks, so the fuzz target and benchmark run it on
// bytes alone.
type accumulator struct {
	capAt   int             // reasoning deltas that trigger onCap; 0: never
	onCap   func(id string) // called once, synchronously
	onEvent func(Event)     // may be nil

	events             int // SSE events seen, including [DONE]
	id, model, fprint  string
	content, reasoning strings.Builder
	calls              []*toolCallAcc
	finish             string
	usage              Usage
	timings            *Timings
	progress           PromptProgress
	reasoningTokens    int
	capFired           bool
}

var doneData = []byte("[DONE]")

// event handles one SSE event's data; done reports the [DONE] terminator.
func (a *accumulator) event(data []byte) (done bool, err error) {
	a.events++
	if bytes.Equal(data, doneData) {
		if a.finish == "" {
			return false, a.invalid("[DONE] before a finish reason")
		}
		return true, nil
	}
	var c chunk
	if !decodeChunk(data, &c, a.id, a.model, a.fprint) {
		// Anything the fast path does not decode exactly as encoding/json
		// (an error event, odd JSON) is decoded by encoding/json itself.
		c = chunk{}
		if err := json.Unmarshal(data, &c); err != nil {
			return false, a.invalid("decode chunk: %v", err)
		}
	}
	if c.Error != nil {
		// reference: server-context.cpp:4276-4285; no [DONE] follows.
		return false, c.Error.serverError("chat completion", 200, true)
	}
	if c.ID == "" {
		return false, a.invalid("chunk has no id")
	}
	if a.id == "" {
		a.id, a.model, a.fprint = c.ID, c.Model, c.SystemFingerprint
	} else if c.ID != a.id {
		// One id per request (reference: server-context.cpp:4127).
		return false, a.invalid("chunk id %s differs from %s", clip(c.ID), clip(a.id))
	}
	switch len(c.Choices) {
	case 0: // the usage chunk
	case 1:
		if err := a.choice(&c.Choices[0]); err != nil {
			return false, err
		}
	default:
		return false, a.invalid("chunk has %d choices, want at most 1", len(c.Choices))
	}
	if c.PromptProgress != nil {
		a.progress = *c.PromptProgress
		a.emit(Event{Kind: EventProgress, Progress: a.progress})
	}
	if c.Usage != nil {
		a.usage = *c.Usage
	}
	if c.Timings != nil {
		t := *c.Timings
		a.timings = &t
	}
	return false, nil
}

func (a *accumulator) choice(ch *chunkChoice) error {
	if ch.Index != 0 {
		return a.invalid("choice index %d, want 0", ch.Index)
	}
	d := &ch.Delta
	if d.Role != "" && d.Role != chat.RoleAssistant {
		return a.invalid("delta role %s, want assistant", clip(d.Role))
	}
	if a.finish != "" && (d.Content != "" || d.ReasoningContent != "" || len(d.ToolCalls) > 0) {
		return a.invalid("delta after finish reason %s", clip(a.finish))
	}
	if d.ReasoningContent != "" {
		a.reasoning.WriteString(d.ReasoningContent)
		a.reasoningTokens++
		a.emit(Event{Kind: EventReasoning, Text: d.ReasoningContent})
		if a.capAt > 0 && a.reasoningTokens == a.capAt && !a.capFired {
			a.capFired = true
			if a.onCap != nil {
				a.onCap(a.id)
			}
		}
	}
	if d.Content != "" {
		a.content.WriteString(d.Content)
		a.emit(Event{Kind: EventContent, Text: d.Content})
	}
	for i := range d.ToolCalls {
		if err := a.toolCall(&d.ToolCalls[i]); err != nil {
			return err
		}
	}
	if ch.FinishReason != nil {
		if *ch.FinishReason == "" {
			return a.invalid("empty finish reason")
		}
		if a.finish != "" {
			return a.invalid("second finish reason %s after %s", clip(*ch.FinishReason), clip(a.finish))
		}
		a.finish = *ch.FinishReason
	}
	return nil
}

// toolCall applies one fragment. The server only ever extends the last call
// or starts the next one (reference: common/chat.cpp:266-330), so any other
// index, a call without id or name, or a change of id or name is refused.
func (a *accumulator) toolCall(tc *toolCallDelta) error {
	if tc.Index == nil {
		return a.invalid("tool call fragment without index")
	}
	i, n := *tc.Index, len(a.calls)
	if tc.Type != "" && tc.Type != "function" {
		return a.invalid("tool call %d has type %s, want function", i, clip(tc.Type))
	}
	var call *toolCallAcc
	switch {
	case i == n:
		if tc.ID == "" || tc.Function.Name == "" {
			return a.invalid("tool call %d starts without an id and a function name", i)
		}
		call = &toolCallAcc{id: tc.ID, name: tc.Function.Name}
		a.calls = append(a.calls, call)
	case i == n-1:
		call = a.calls[i]
		// A repeat of the same id or name changes nothing; a different
		// one would make the stored call disagree with what ran.
		if tc.ID != "" && tc.ID != call.id {
			return a.invalid("tool call %d: second id %s after %s", i, clip(tc.ID), clip(call.id))
		}
		if tc.Function.Name != "" && tc.Function.Name != call.name {
			return a.invalid("tool call %d: second name %s after %s", i, clip(tc.Function.Name), clip(call.name))
		}
	case i > n:
		return a.invalid("tool call index %d skips ahead of %d calls", i, n)
	default:
		return a.invalid("tool call index %d goes back from call %d", i, n-1)
	}
	call.args = append(call.args, tc.Function.Arguments...)
	ev := Event{Kind: EventToolCall, Text: tc.Function.Arguments, ToolIndex: i}
	if i == n {
		ev.ToolName = call.name
	}
	a.emit(ev)
	return nil
}

func (a *accumulator) emit(ev Event) {
	if a.onEvent != nil {
		a.onEvent(ev)
	}
}

func (a *accumulator) invalid(format string, args ...any) *StreamError {
	return &StreamError{Kind: StreamInvalid, Event: a.events, Msg: fmt.Sprintf(format, args...)}
}

// completion returns what has been accumulated.
func (a *accumulator) completion() *Completion {
	msg := chat.Message{Role: chat.RoleAssistant, Content: a.content.String(), ReasoningContent: a.reasoning.String()}
	for _, c := range a.calls {
		msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{
			ID: c.id, Type: "function",
			Function: chat.FunctionCall{Name: c.name, Arguments: string(c.args)},
		})
	}
	comp := &Completion{
		ID: a.id, Model: a.model, SystemFingerprint: a.fprint,
		Message: msg, FinishReason: a.finish, Usage: a.usage, Timings: a.timings,
		Progress: a.progress, ReasoningTokens: a.reasoningTokens, CapFired: a.capFired,
	}
	if a.capFired {
		comp.CapAt = a.capAt
	}
	return comp
}

// readStream feeds the SSE events of r to a until [DONE]. A clean end of r
// before [DONE] is a truncated stream; other read errors are returned as is.
func readStream(r io.Reader, maxEvent int, a *accumulator) error {
	d := newSSEDecoder(r, maxEvent)
	for {
		data, err := d.next()
		if err != nil {
			var tooLarge errEventTooLarge
			switch {
			case errors.As(err, &tooLarge):
				return &StreamError{Kind: StreamTooLarge, Event: a.events + 1, Msg: err.Error()}
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				return &StreamError{Kind: StreamTruncated, Event: a.events, Msg: "stream ended without [DONE] or an error event"}
			}
			return err
		}
		done, err := a.event(data)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// clip quotes a peer-supplied string for an error message, cut to a length
// that cannot flood a log.
func clip(s string) string {
	if c, cut := truncate.Bytes(s, 64); cut {
		return fmt.Sprintf("%q...", c)
	}
	return fmt.Sprintf("%q", s)
}
