package llama

import (
	"bytes"
	"encoding/json"

	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// Request is one completion request: the whole conversation so far and the
// epoch's tools. Sampling, slot and limits come from the [Config].
type Request struct {
	Messages []chat.Message
	Tools    []chat.Tool
	// ToolChoice is "", "auto", "none" or "required"; the server takes only
	// these strings, and an object would silently mean "auto" (reference:
	// server-common.cpp:1138). Empty leaves it out. The self-test uses
	// "required"; a session never does, because the grammar would force a
	// call into a declared tool whatever the model meant.
	ToolChoice string
	// MaxTokens, if not 0, replaces the client's max_tokens for this
	// request, and Sampling, if not nil, its sampling: the self-test bounds
	// and fixes its own short conversations this way; a session never does.
	MaxTokens int
	Sampling  *Sampling
	// OnEvent, if not nil, is called on Complete's goroutine for every
	// streamed fragment and progress event, in stream order. It must return
	// quickly: while it runs the stream is not read, and the idle limit
	// keeps counting.
	OnEvent func(Event)
}

// chatRequest is the body of POST /v1/chat/completions. Field order is the
// wire order. reference: server-common.cpp:1128-1396, server-schema.cpp.
type chatRequest struct {
	Model            string         `json:"model"`
	Messages         []chat.Message `json:"messages"`
	Tools            []chat.Tool    `json:"tools,omitempty"` // absent and [] both mean no tools
	ToolChoice       string         `json:"tool_choice,omitempty"`
	Stream           bool           `json:"stream"`
	StreamOptions    streamOptions  `json:"stream_options"`
	ReturnProgress   bool           `json:"return_progress"`   // prompt processing sends events: liveness
	ReasoningControl bool           `json:"reasoning_control"` // arms the control endpoint (server-common.cpp:1365)
	IDSlot           int            `json:"id_slot"`
	Temperature      float64        `json:"temperature"`
	TopP             float64        `json:"top_p"`
	TopK             int            `json:"top_k"`
	MaxTokens        int            `json:"max_tokens"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// controlRequest is the body of POST /v1/chat/completions/control.
// reference: README.md:1439-1455, server-context.cpp:4811-4845.
type controlRequest struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Model  string `json:"model"` // the router routes on it (server-models.cpp:1914-1922)
}

type controlResponse struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// marshalJSON encodes v without HTML escaping, so "<", ">" and "&" in
// replayed text stay as they are in the session log. (encoding/json still
// escapes U+2028 and U+2029, which decodes to the same string.)
func marshalJSON(v any, sizeHint int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(sizeHint + sizeHint/8)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
