package llama

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixedNow makes "created" reproducible in golden files.
func fixedNow() time.Time { return time.Unix(1766000000, 0) }

// msg builds a chat message.
func msg(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

// chatBody builds a streaming chat request for the fake's default model.
func chatBody(msgs []map[string]any, extra map[string]any) map[string]any {
	b := map[string]any{"model": "fake-model", "stream": true, "messages": msgs}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

func post(t testing.TB, url string, body any) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(mustJSON(t, body)))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// postJSON posts body and decodes the answer into out, returning the status.
func postJSON(t testing.TB, url string, body, out any) int {
	t.Helper()
	resp := post(t, url, body)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("POST %s: decode %q: %v", url, data, err)
		}
	}
	return resp.StatusCode
}

func getBody(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// event is one SSE event: a comment (ping) or a data payload.
type event struct {
	comment bool
	data    string
	at      time.Time
}

// readEvents reads SSE events until EOF, noting when each arrived.
func readEvents(t testing.TB, r io.Reader) []event {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, ":"):
			out = append(out, event{comment: true, at: time.Now()})
		case strings.HasPrefix(line, "data: "):
			out = append(out, event{data: strings.TrimPrefix(line, "data: "), at: time.Now()})
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

// result is a finished stream, reassembled as a client would.
type result struct {
	id      string
	message map[string]any // the assistant message to replay
	finish  string
	timings map[string]any
	usage   map[string]any
	done    bool // saw [DONE]
	events  []event
	errBody map[string]any
}

func (r result) num(m map[string]any, k string) int {
	v, _ := m[k].(float64)
	return int(v)
}

// total is the context the turn used: cache_n + prompt_n + predicted_n.
func (r result) total() int {
	return r.num(r.timings, "cache_n") + r.num(r.timings, "prompt_n") + r.num(r.timings, "predicted_n")
}

type chunkJSON struct {
	ID      string `json:"id"`
	Choices []struct {
		FinishReason *string `json:"finish_reason"`
		Delta        struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Timings map[string]any `json:"timings"`
	Usage   map[string]any `json:"usage"`
	Error   map[string]any `json:"error"`
}

// assemble rebuilds the assistant message from a stream's events.
func assemble(t testing.TB, events []event) result {
	t.Helper()
	res := result{events: events}
	var reasoning, content strings.Builder
	type call struct{ id, name, args string }
	var calls []*call
	for _, e := range events {
		if e.comment {
			continue
		}
		if e.data == "[DONE]" {
			res.done = true
			continue
		}
		var c chunkJSON
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("chunk %q: %v", e.data, err)
		}
		if c.Error != nil {
			res.errBody = c.Error
			continue
		}
		res.id = c.ID
		if c.Timings != nil {
			res.timings = c.Timings
		}
		if c.Usage != nil {
			res.usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				res.finish = *ch.FinishReason
			}
			d := ch.Delta
			if d.ReasoningContent != nil {
				reasoning.WriteString(*d.ReasoningContent)
			}
			if d.Content != nil {
				content.WriteString(*d.Content)
			}
			for _, tc := range d.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, &call{})
				}
				cl := calls[tc.Index]
				if tc.ID != "" {
					cl.id = tc.ID
				}
				if tc.Function.Name != "" {
					cl.name = tc.Function.Name
				}
				cl.args += tc.Function.Arguments
			}
		}
	}
	m := map[string]any{"role": "assistant", "content": content.String(), "reasoning_content": reasoning.String()}
	if len(calls) > 0 {
		var tcs []map[string]any
		for _, c := range calls {
			tcs = append(tcs, map[string]any{"id": c.id, "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		m["tool_calls"] = tcs
	}
	res.message = m
	return res
}

// stream posts a chat request and reads the whole stream.
func stream(t testing.TB, srv *Server, body map[string]any) result {
	t.Helper()
	resp := post(t, srv.URL()+"/v1/chat/completions", body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("chat: status %d: %s", resp.StatusCode, data)
	}
	return assemble(t, readEvents(t, resp.Body))
}

// promptTokens is what the fake should count for body's prompt.
func promptTokens(t testing.TB, body map[string]any) int {
	t.Helper()
	text, err := RenderPrompt(mustJSON(t, body))
	if err != nil {
		t.Fatalf("RenderPrompt: %v", err)
	}
	return len(Tokenize(text))
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}
