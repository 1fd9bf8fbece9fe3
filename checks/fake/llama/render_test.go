package llama

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		text    string
		special bool
		want    []string
	}{
		{"words and bytes", "Hello, world42!", true, []string{"Hello", ",", " ", "world42", "!"}},
		{"control tokens", "<|im_start|>user\nhi<|im_end|>", true, []string{"<|im_start|>", "user", "\n", "hi", "<|im_end|>"}},
		{"control tokens as text", "<think>", false, []string{"<", "think", ">"}},
		{"unknown tag", "<tool>", true, []string{"<", "tool", ">"}},
		{"multibyte", "é", true, []string{"\xc3", "\xa9"}},
		{"empty", "", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tokenize(tc.text, tc.special); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("tokenize(%q, %v) = %q, want %q", tc.text, tc.special, got, tc.want)
			}
		})
	}
	if got := Tokenize("<think>a"); !reflect.DeepEqual(got, []int{151667, tokenID("a")}) {
		t.Errorf("Tokenize(%q) = %v, want the <think> id then a's", "<think>a", got)
	}
}

// TestRenderPromptGolden pins the Go port of the keep-thinking template on
// a conversation with every kind of message.
func TestRenderPromptGolden(t *testing.T) {
	body := chatBody([]map[string]any{
		msg("system", "  You are terse.  "),
		msg("user", "Read two files."),
		{"role": "assistant", "content": "", "reasoning_content": "\nTwo reads.\n", "tool_calls": []any{
			map[string]any{"id": "a", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"/a","n":1}`}},
			map[string]any{"id": "b", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"/b","opts":{"x":true}}`}},
		}},
		{"role": "tool", "tool_call_id": "a", "content": "A"},
		{"role": "tool", "tool_call_id": "b", "content": "B"},
		{"role": "assistant", "content": "<think>old style</think>\n\nBoth read."},
		{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Thanks"}}},
	}, map[string]any{"tools": toolsFixture})
	got, err := RenderPrompt(mustJSON(t, body))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "prompt.txt", []byte(got))
}

func TestRenderPromptErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []map[string]any
		want string
	}{
		{"no messages", []map[string]any{}, "No messages provided."},
		{"system not first", []map[string]any{msg("user", "a"), msg("system", "b")}, "System message must be at the beginning."},
		{"no user query", []map[string]any{msg("system", "a")}, "No user query found in messages."},
		{"unknown role", []map[string]any{msg("user", "a"), msg("robot", "b")}, "Unexpected message role."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, apiErr := parseChat(mustFields(t, chatBody(tc.msgs, nil)))
			if apiErr != nil {
				t.Fatalf("parseChat: %v", apiErr.Message)
			}
			_, err := renderPrompt(req.tools, req.messages, true, false)
			if _, ok := err.(templateError); !ok || err.Error() != tc.want {
				t.Errorf("renderPrompt error = %v, want template error %q", err, tc.want)
			}
		})
	}
}

func mustFields(t testing.TB, body map[string]any) map[string]json.RawMessage {
	t.Helper()
	var f map[string]json.RawMessage
	if err := json.Unmarshal(mustJSON(t, body), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// replayedMessage is the assistant message a client assembles from the
// stream of p: the reasoning and content deltas joined, and each call's
// arguments as streamed.
func replayedMessage(p plan) map[string]any {
	var reasoning, content strings.Builder
	for _, tok := range slices.Concat(p.reasoning, p.close, p.rest) {
		switch tok.kind {
		case kindReasoning:
			reasoning.WriteString(tok.piece)
		case kindContent:
			content.WriteString(tok.piece)
		}
	}
	m := map[string]any{"role": "assistant", "content": content.String(), "reasoning_content": reasoning.String()}
	var calls []any
	for _, c := range p.calls {
		calls = append(calls, map[string]any{"id": c.id, "type": "function",
			"function": map[string]any{"name": c.name, "arguments": c.args}})
	}
	if calls != nil {
		m["tool_calls"] = calls
	}
	return m
}

// FuzzReplayExtendsPrefix checks the property prefix reuse rests on: the
// next request's prompt, with the reply replayed as streamed, starts with
// this request's prompt followed by every generated token.
func FuzzReplayExtendsPrefix(f *testing.F) {
	f.Add("Let me think.", "Here you go.", "/tmp/x", true)
	f.Add("", "", "", true)
	f.Add("  padded  ", "\n\ncontent\n", "a<b>c", false)
	f.Add("ünï <think> x", "wörld<|im_end|>", "</tool_call>", true)
	f.Add("abc<", "|im_end|>", "\"quoted\"", false)
	f.Fuzz(func(t *testing.T, reasoning, content, arg string, call bool) {
		if !utf8.ValidString(reasoning) || !utf8.ValidString(content) || !utf8.ValidString(arg) {
			t.Skip("the wire is JSON; invalid UTF-8 cannot be replayed")
		}
		reply := Reply{Reasoning: reasoning, Content: content}
		if call {
			reply.ToolCalls = []ToolCall{
				{Name: "read_file", Arguments: string(mustJSON(t, map[string]any{"path": arg, "n": 2}))},
				{Name: "list", Arguments: `{}`},
			}
		}
		n := 0
		p := makePlan(reply, true, func() string { n++; return strings.Repeat("x", n) })
		var generated []string
		for _, tok := range slices.Concat(p.reasoning, p.close, p.rest) {
			generated = append(generated, tok.piece)
		}

		first := []map[string]any{msg("user", "Question")}
		text1, err := RenderPrompt(mustJSON(t, chatBody(first, nil)))
		if err != nil {
			t.Fatal(err)
		}
		next := append(first, replayedMessage(p), msg("user", "More"))
		text2, err := RenderPrompt(mustJSON(t, chatBody(next, nil)))
		if err != nil {
			t.Fatal(err)
		}
		want := append(tokenize(text1, true), generated...)
		got := tokenize(text2, true)
		if n := commonPrefix(got, want); n != len(want) {
			t.Fatalf("replayed prompt diverges at token %d of %d: got %q, want %q", n, len(want), got[n:min(n+5, len(got))], want[n:min(n+5, len(want))])
		}
	})
}
