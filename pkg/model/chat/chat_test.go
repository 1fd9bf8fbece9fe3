package chat

import (
	"encoding/json"
	"testing"
)

// TestWireBytes pins the wire form: field order, omitted empties, and the
// bytes a decoded message marshals back to.
func TestWireBytes(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"user", Message{Role: RoleUser, Content: "hi"}, `{"role":"user","content":"hi"}`},
		{"assistant with call", Message{Role: RoleAssistant, ReasoningContent: "r", ToolCalls: []ToolCall{{ID: "a", Type: "function", Function: FunctionCall{Name: "clock", Arguments: "{}"}}}},
			`{"role":"assistant","content":"","reasoning_content":"r","tool_calls":[{"id":"a","type":"function","function":{"name":"clock","arguments":"{}"}}]}`},
		{"tool result", Message{Role: RoleTool, Content: "12:00", ToolCallID: "a", Name: "clock"}, `{"role":"tool","content":"12:00","tool_call_id":"a","name":"clock"}`},
		{"tool", NewTool("clock", "Now.", json.RawMessage(`{"type":"object"}`)), `{"type":"function","function":{"name":"clock","description":"Now.","parameters":{"type":"object"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.v)
			if err != nil || string(b) != tt.want {
				t.Fatalf("Marshal = %s, %v; want %s", b, err, tt.want)
			}
			if m, ok := tt.v.(Message); ok {
				var back Message
				if err := json.Unmarshal(b, &back); err != nil {
					t.Fatal(err)
				}
				again, _ := json.Marshal(back)
				if string(again) != tt.want {
					t.Errorf("round trip of %+v = %s, want %s", m, again, tt.want)
				}
			}
		})
	}
}

// TestImageParts: a user message with a loaded image encodes as content
// parts (its text, then each image as an image_url part, the shape
// llama-server's chat endpoint takes); one whose images are not loaded,
// and every other message, encodes exactly as the plain struct does.
func TestImageParts(t *testing.T) {
	m := Message{Role: RoleUser, Content: "what is <this>?", Images: []Image{{ID: "a", Type: "image/png", URL: "data:image/png;base64,iVBO"}, {ID: "b", Type: "image/png"}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"user","content":[{"type":"text","text":"what is \u003cthis\u003e?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]}`
	if string(b) != want {
		t.Errorf("Marshal = %s\nwant      %s", b, want)
	}
	m.Images[0].URL = ""
	b, _ = json.Marshal(m)
	plain, _ := json.Marshal(plainMessage(m))
	if string(b) != string(plain) || string(b) != `{"role":"user","content":"what is \u003cthis\u003e?"}` {
		t.Errorf("unloaded images: %s, plain %s", b, plain)
	}
}
