// Package chat is the vocabulary of a chat conversation as llama-server's
// OpenAI-compatible endpoint carries it: messages, their roles, tool calls
// and the tools array. loopd and bxctl selftest send it through the
// inference client (package llama), the session log stores it (package
// sessionlog), and memoryd reads it back from that log without linking the
// client.
//
// Invariant: this package depends on nothing beyond the standard library,
// and every type marshals to the same bytes it was decoded from (field
// order is the wire order; no field is rewritten), so a stored assistant
// reply can be replayed unchanged and turn N+1 stays a prefix extension of
// turn N (design brief, inference contract 2).
package chat

import "encoding/json"

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
