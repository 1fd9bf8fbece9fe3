package llama

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var toolsFixture = []any{map[string]any{
	"type": "function",
	"function": map[string]any{
		"name":        "read_file",
		"description": "Read a file.",
		"parameters": map[string]any{
			"type":       "object",
			"properties": map[string]any{"path": map[string]any{"type": "string"}},
			"required":   []string{"path"},
		},
	},
}}

func goldenServer(t *testing.T) *Server {
	return New(t, Options{Seed: 1, Now: fixedNow, NBatch: 64})
}

func rawStream(t *testing.T, srv *Server, body map[string]any) []byte {
	t.Helper()
	resp := post(t, srv.URL()+"/v1/chat/completions", body)
	defer resp.Body.Close()
	if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", got)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestGoldenToolCallStream pins the full transcript of a reply with
// reasoning, content and a tool call, with progress and usage.
func TestGoldenToolCallStream(t *testing.T) {
	srv := goldenServer(t)
	srv.Script(Reply{
		Reasoning: "I should read the file.",
		Content:   "Let me look.",
		ToolCalls: []ToolCall{{Name: "read_file", Arguments: `{"path": "/etc/hostname", "lines": 2}`}},
	})
	body := chatBody([]map[string]any{msg("system", "You are terse."), msg("user", "What is my hostname?")}, map[string]any{
		"tools": toolsFixture, "return_progress": true,
		"stream_options": map[string]any{"include_usage": true},
		"temperature":    0.6, "top_p": 0.95, "top_k": 20, "id_slot": 0,
	})
	data := rawStream(t, srv, body)
	golden(t, "stream_tool_call.sse", data)

	// The properties the golden file must show, checked by rule so that a
	// regenerated golden cannot quietly lose them.
	res := assemble(t, readEvents(t, strings.NewReader(string(data))))
	if !regexp.MustCompile(`^chatcmpl-[0-9A-Za-z]{32}$`).MatchString(res.id) {
		t.Errorf("id = %q, want chatcmpl- and 32 alphanumerics", res.id)
	}
	if res.finish != "tool_calls" || !res.done {
		t.Errorf("finish = %q, done = %v, want tool_calls and [DONE]", res.finish, res.done)
	}
	calls := res.message["tool_calls"].([]map[string]any)
	args := calls[0]["function"].(map[string]any)["arguments"]
	if args != `{"path":"/etc/hostname","lines":2}` {
		t.Errorf("arguments = %q, want the compacted object in its key order", args)
	}
	if strings.Count(string(data), `"type":"function"`) != 1 {
		t.Errorf("type appears %d times, want only on the first fragment", strings.Count(string(data), `"type":"function"`))
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n\n")
	last := lines[len(lines)-2] // before [DONE]
	if !strings.Contains(last, `"choices":[]`) || !strings.Contains(last, `"timings"`) || !strings.Contains(last, `"usage"`) {
		t.Errorf("last chunk = %s, want the usage chunk carrying timings", last)
	}
	if strings.Contains(lines[len(lines)-3], `"timings"`) {
		t.Errorf("finish chunk carries timings although a usage chunk follows")
	}
	prompt := promptTokens(t, body)
	if got := res.num(res.usage, "prompt_tokens"); got != prompt {
		t.Errorf("usage.prompt_tokens = %d, want %d", got, prompt)
	}
	if want := 1 + (prompt+63)/64; strings.Count(string(data), "prompt_progress") != want {
		t.Errorf("%d progress chunks, want %d (one at 0%% and one per batch of 64)", strings.Count(string(data), "prompt_progress"), want)
	}
	var sent map[string]any
	if err := json.Unmarshal(srv.LastRequest(0), &sent); err != nil || sent["temperature"] != 0.6 || sent["top_k"] != 20.0 {
		t.Errorf("LastRequest(0) = %s, want the body as sent", srv.LastRequest(0))
	}
}

// TestGoldenPlainStream pins a stream without progress or usage: headers
// first, then the role chunk, and timings on the finish chunk.
func TestGoldenPlainStream(t *testing.T) {
	srv := goldenServer(t)
	srv.Script(Reply{Reasoning: "Short.", Content: "Héllo, wörld."})
	data := rawStream(t, srv, chatBody([]map[string]any{msg("user", "Hi")}, nil))
	golden(t, "stream_plain.sse", data)
	if !strings.HasPrefix(string(data), `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}]`) {
		t.Errorf("stream starts %.120q, want the role delta chunk", data)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n\n")
	if fin := lines[len(lines)-2]; !strings.Contains(fin, `"finish_reason":"stop"`) || !strings.Contains(fin, `"timings"`) {
		t.Errorf("finish chunk = %s, want finish_reason stop and timings", fin)
	}
}

// TestGoldenEndpoints pins the JSON of /props, /slots, /tokenize and the
// errors.
func TestGoldenEndpoints(t *testing.T) {
	srv := New(t, Options{Seed: 1, Now: fixedNow, NCtx: 64, ChatTemplate: "{{ template }}"})
	var b strings.Builder
	add := func(name string, status int, body []byte) {
		b.WriteString("## " + name + "\n")
		b.WriteString(http.StatusText(status) + "\n")
		b.Write(body)
		b.WriteString("\n\n")
	}
	get := func(path string) {
		status, body := getBody(t, srv.URL()+path)
		add("GET "+path, status, body)
	}
	postRaw := func(path string, req any) {
		resp := post(t, srv.URL()+path, req)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		add("POST "+path+" "+string(mustJSON(t, req)), resp.StatusCode, body)
	}
	get("/health")
	get("/props")
	get("/slots")
	postRaw("/tokenize", map[string]any{"model": "fake-model", "content": "Hi <think>é", "with_pieces": true})
	postRaw("/tokenize", map[string]any{"model": "fake-model", "content": "<think>", "parse_special": false})
	postRaw("/v1/chat/completions", chatBody([]map[string]any{msg("user", strings.Repeat("word ", 40))}, nil))
	postRaw("/v1/chat/completions", chatBody([]map[string]any{msg("user", "hi")}, map[string]any{"stream": false}))
	postRaw("/v1/chat/completions", chatBody([]map[string]any{msg("user", "hi")}, map[string]any{"tool_choice": "sometimes"}))
	postRaw("/v1/chat/completions", chatBody([]map[string]any{msg("assistant", "hi")}, nil))
	postRaw("/v1/chat/completions", map[string]any{"stream": true, "messages": []any{msg("user", "hi")}})
	postRaw("/v1/chat/completions", map[string]any{"model": "other", "stream": true, "messages": []any{msg("user", "hi")}})
	postRaw("/v1/chat/completions/control", map[string]any{"model": "fake-model", "action": "reasoning_end"})
	postRaw("/v1/chat/completions/control", map[string]any{"model": "fake-model", "id": "chatcmpl-x", "action": "pause"})
	postRaw("/v1/chat/completions/control", map[string]any{"model": "fake-model", "id": "chatcmpl-x", "action": "reasoning_end"})
	postRaw("/v1/chat/completions/input_tokens", chatBody([]map[string]any{msg("user", "hi")}, nil))
	get("/slots")
	golden(t, "endpoints.txt", []byte(b.String()))
}
