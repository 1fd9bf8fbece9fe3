// Package chat is the vocabulary of a chat conversation as llama-server's
// OpenAI-compatible endpoint carries it: messages, their roles, tool calls
// and the tools array. loopd and bxctl (selftest, verify-device) send it
// through the inference client (package llama), the session log stores it
// (package sessionlog), and memoryd reads it back from that log without
// linking the client.
//
// Invariant: this package depends on nothing beyond the standard library,
// and every type marshals to the same bytes it was decoded from (field
// order is the wire order; no field is rewritten), so a stored assistant
// reply can be replayed unchanged and turn N+1 stays a prefix extension of
// turn N (design brief, inference contract 2). The one exception is a user
// message with loaded images: it is sent as text and image_url content
// parts, and its images are never stored ([Message.Images]).
package chat

import (
	"bytes"
	"encoding/json"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one chat message in the shape llama-server parses
// (upstream common/chat.cpp common_chat_msgs_parse_oaicompat). The field
// order is the wire order, so a message always marshals to the same bytes.
//
// An assistant Message returned by the inference client is meant to be
// stored and sent back unchanged; nothing rewrites its strings.
type Message struct {
	Role string `json:"role"`
	// Content is always sent. The server needs content or tool_calls on
	// every message, and it parses "" exactly as it parses an absent
	// content on an assistant message that has tool calls.
	Content string `json:"content"`
	// ReasoningContent is the thinking block. Absent and "" are the same
	// to the server (it reads it only if present).
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"` // role "tool": the call answered
	Name             string     `json:"name,omitempty"`         // role "tool": the tool's name
	// Images are the images a user message carries (issue 29): never
	// stored in a log (the log holds the files' descriptors), set by
	// replay from them and loaded by loopd's engine for a model that can
	// see. Only an image with its URL set is sent, after the text, as an
	// image_url part (MarshalJSON); with none, the message is the plain
	// string content it always was.
	Images []Image `json:"-"`
}

// Image is one image of a user message.
type Image struct {
	ID   string // the posted file's id
	Type string // its media type, image/png ...
	// URL is the image as a data URL ("data:image/png;base64,..."), the
	// only form llama-server takes besides a remote URL (tools/server/
	// server-common.cpp handle_media), or "" while it is not loaded.
	URL string
}

// plainMessage is Message without its methods: its fields encode as
// declared.
type plainMessage Message

// partsMessage is a user message whose content is an array of parts: its
// text, then its images, in the shape llama-server's chat endpoint
// accepts (tools/server/server-common.cpp oaicompat_chat_params_parse:
// {"type":"text","text":...} and {"type":"image_url","image_url":{"url":
// ...}}; the server replaces each image part by its media marker).
type partsMessage struct {
	Role    string `json:"role"`
	Content []part `json:"content"`
}

type part struct {
	Type     string    `json:"type"`
	Text     *string   `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

// MarshalJSON writes the message: its declared fields, or, when it holds
// a loaded image, its text and images as content parts. A message with
// no loaded image encodes exactly as the struct always did (the encoder
// that calls this decides HTML escaping, as for any field).
func (m Message) MarshalJSON() ([]byte, error) {
	var parts []part
	for _, im := range m.Images {
		if im.URL != "" {
			parts = append(parts, part{Type: "image_url", ImageURL: &imageURL{URL: im.URL}})
		}
	}
	var v any = plainMessage(m)
	if len(parts) > 0 {
		text := m.Content
		v = partsMessage{Role: m.Role, Content: append([]part{{Type: "text", Text: &text}}, parts...)}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ToolCall is a tool call as the server streamed it and as it is replayed.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // always "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as the JSON text
// the model produced, unparsed: re-encoding it would change the prompt.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is one entry of the tools array. The array must stay identical for a
// whole epoch: the template renders it at the top of the prompt.
type Tool struct {
	Type     string       `json:"type"` // "function"
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a function. Parameters is the JSON Schema, kept as
// raw bytes so the caller decides its exact text; encoding/json compacts it.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// NewTool returns a function tool.
func NewTool(name, description string, parameters json.RawMessage) Tool {
	return Tool{Type: "function", Function: ToolFunction{Name: name, Description: description, Parameters: parameters}}
}
