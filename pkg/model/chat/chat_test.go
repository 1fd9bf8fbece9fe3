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
