package llama

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// conversation drives turns on one slot the way the inference client will:
// each request is the previous one plus the assistant message exactly as
// streamed, plus new messages.
type conversation struct {
	t     *testing.T
	srv   *Server
	msgs  []map[string]any
	extra map[string]any
}

func (c *conversation) turn(reply Reply, add ...map[string]any) (result, map[string]any) {
	c.t.Helper()
	c.msgs = append(c.msgs, add...)
	body := chatBody(c.msgs, c.extra)
	c.srv.Script(reply)
	res := stream(c.t, c.srv, body)
	if !res.done {
		c.t.Fatalf("turn ended without [DONE]")
	}
	c.msgs = append(c.msgs, res.message)
	return res, body
}

func newConversation(t *testing.T, srv *Server) *conversation {
	return &conversation{t: t, srv: srv, extra: map[string]any{
		"id_slot": 0, "tools": toolsFixture, "return_progress": true,
		"stream_options": map[string]any{"include_usage": true},
	}}
}

func cacheN(r result) int { return r.num(r.timings, "cache_n") }

// TestPrefixReuseThreeTurns: with the assistant message replayed exactly,
// each turn reuses everything but the last sampled token of the previous
// one, including a turn with a tool call and its result.
func TestPrefixReuseThreeTurns(t *testing.T) {
	srv := New(t, Options{})
	c := newConversation(t, srv)
	r1, b1 := c.turn(Reply{Reasoning: "The user greets me.", Content: "Hello! How can I help?"},
		msg("system", "You are terse."), msg("user", "Hi there"))
	if got, want := cacheN(r1), 0; got != want {
		t.Errorf("turn 1 cache_n = %d, want %d", got, want)
	}
	if got, want := r1.num(r1.usage, "prompt_tokens"), promptTokens(t, b1); got != want {
		t.Errorf("turn 1 prompt_tokens = %d, want %d", got, want)
	}

	r2, b2 := c.turn(Reply{
		Reasoning: "I need the file — with ünïcode.",
		ToolCalls: []ToolCall{{Name: "read_file", Arguments: `{"path":"/tmp/a b","opts":{"x":[1,2]},"n":3}`}},
	}, msg("user", "Read /tmp/a b please"))
	if got, want := cacheN(r2), r1.total()-1; got != want {
		t.Errorf("turn 2 cache_n = %d, want previous total %d - 1", got, r1.total())
	}
	if got, want := r2.num(r2.usage, "prompt_tokens"), promptTokens(t, b2); got != want {
		t.Errorf("turn 2 prompt_tokens = %d, want %d", got, want)
	}
	if r2.finish != "tool_calls" {
		t.Errorf("turn 2 finish_reason = %q, want tool_calls", r2.finish)
	}

	callID := r2.message["tool_calls"].([]map[string]any)[0]["id"].(string)
	r3, _ := c.turn(Reply{Reasoning: "Got it.", Content: "The file says hi."},
		map[string]any{"role": "tool", "tool_call_id": callID, "content": "hi"})
	if got, want := cacheN(r3), r2.total()-1; got != want {
		t.Errorf("turn 3 cache_n = %d, want previous total %d - 1", got, r2.total())
	}
	if p := r3.num(r3.timings, "prompt_n"); p <= 1 || p > 40 {
		t.Errorf("turn 3 prompt_n = %d, want only the new tool result re-read", p)
	}

	// Progress counts the cached tokens as processed: it starts at
	// cache_n and ends at the prompt's size.
	prog := progressOf(t, r3)
	total := r3.num(r3.usage, "prompt_tokens")
	if len(prog) != 2 || prog[0] != [3]int{total, cacheN(r3), cacheN(r3)} || prog[1] != [3]int{total, cacheN(r3), total} {
		t.Errorf("turn 3 progress (total, cache, processed) = %v, want %d from %d to %d", prog, total, cacheN(r3), total)
	}
}

// progressOf lists the prompt_progress of a stream as (total, cache,
// processed).
func progressOf(t *testing.T, r result) [][3]int {
	t.Helper()
	var out [][3]int
	for _, e := range r.events {
		var c struct {
			P *progress `json:"prompt_progress"`
		}
		if e.comment || e.data == "[DONE]" {
			continue
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatal(err)
		}
		if c.P != nil {
			out = append(out, [3]int{c.P.Total, c.P.Cache, c.P.Processed})
		}
	}
	return out
}

// TestDivergenceRereadsEverything: editing an earlier message diverges
// inside the cached prompt, which a hybrid model cannot rewind to.
func TestDivergenceRereadsEverything(t *testing.T) {
	srv := New(t, Options{})
	c := newConversation(t, srv)
	c.turn(Reply{Content: "One."}, msg("user", "First question"))
	c.msgs[0] = msg("user", "First question, edited")
	r2, b2 := c.turn(Reply{Content: "Two."}, msg("user", "Second"))
	if got := cacheN(r2); got != 0 {
		t.Errorf("cache_n = %d after an edit inside the cached prompt, want 0", got)
	}
	if got, want := r2.num(r2.timings, "prompt_n"), promptTokens(t, b2); got != want {
		t.Errorf("prompt_n = %d, want the whole prompt %d", got, want)
	}
}

// TestDroppedReasoningRestoresCheckpoint: a client that drops the reply's
// reasoning diverges inside the reply, after the checkpoint taken 4 tokens
// before the end of the previous prompt.
func TestDroppedReasoningRestoresCheckpoint(t *testing.T) {
	srv := New(t, Options{})
	c := newConversation(t, srv)
	r1, _ := c.turn(Reply{Reasoning: "Some thoughts.", Content: "One."}, msg("user", "First"))
	delete(c.msgs[len(c.msgs)-1], "reasoning_content")
	r2, _ := c.turn(Reply{Content: "Two."}, msg("user", "Second"))
	if got, want := cacheN(r2), r1.num(r1.usage, "prompt_tokens")-4; got != want {
		t.Errorf("cache_n = %d, want the checkpoint at previous prompt %d - 4", got, r1.num(r1.usage, "prompt_tokens"))
	}
}

// TestEvictLosesCache: another client on the slot replaces its cache.
func TestEvictLosesCache(t *testing.T) {
	srv := New(t, Options{})
	c := newConversation(t, srv)
	c.turn(Reply{Content: "One."}, msg("user", "First"))
	srv.Evict(2) // wraps to slot 0
	r2, _ := c.turn(Reply{Content: "Two."}, msg("user", "Second"))
	if got := cacheN(r2); got != 0 {
		t.Errorf("cache_n = %d after eviction, want 0", got)
	}
	r3, _ := c.turn(Reply{Content: "Three."}, msg("user", "Third"))
	if got, want := cacheN(r3), r2.total()-1; got != want {
		t.Errorf("cache_n = %d after re-reading, want %d", got, want)
	}
}

// TestUnloadWaitsForLoadAndLosesCache: after an unload the next request
// waits for the load, sending nothing, and starts from an empty cache.
func TestUnloadWaitsForLoadAndLosesCache(t *testing.T) {
	const load = 300 * time.Millisecond
	srv := New(t, Options{LoadTime: load})
	c := newConversation(t, srv)
	c.turn(Reply{Content: "One."}, msg("user", "First"))
	srv.Unload()

	var e struct {
		Error apiError `json:"error"`
	}
	if status := getJSON(t, srv.URL()+"/props?model=fake-model&autoload=false", &e); status != http.StatusBadRequest || e.Error.Message != "model is not loaded" {
		t.Errorf("GET /props?autoload=false while unloaded = %d %+v, want 400 model is not loaded", status, e.Error)
	}

	c.msgs = append(c.msgs, msg("user", "Second"))
	srv.Script(Reply{Content: "Two."})
	start := time.Now()
	resp := post(t, srv.URL()+"/v1/chat/completions", chatBody(c.msgs, c.extra))
	defer resp.Body.Close()
	if waited := time.Since(start); waited < load {
		t.Errorf("response headers after %v, want at least the load time %v", waited, load)
	}
	r2 := assemble(t, readEvents(t, resp.Body))
	if got := cacheN(r2); got != 0 {
		t.Errorf("cache_n = %d after unload, want 0", got)
	}
}

// TestUnloadEndsRunningStream: the child goes away under a running stream,
// which ends without [DONE].
func TestUnloadEndsRunningStream(t *testing.T) {
	srv := New(t, Options{})
	srv.Script(Reply{ThinkTokens: 100000, TokenDelay: time.Millisecond})
	resp := post(t, srv.URL()+"/v1/chat/completions", chatBody([]map[string]any{msg("user", "x")}, nil))
	defer resp.Body.Close()
	srv.Unload()
	if res := assemble(t, readEvents(t, resp.Body)); res.done || res.finish != "" {
		t.Errorf("stream after Unload: done %v, finish %q; want it cut off", res.done, res.finish)
	}
}

// TestUnpinnedRequestPrefersCachedSlot: id_slot -1 goes to the idle slot
// holding the conversation.
func TestUnpinnedRequestPrefersCachedSlot(t *testing.T) {
	srv := New(t, Options{})
	c := newConversation(t, srv)
	c.extra["id_slot"] = 1
	r1, _ := c.turn(Reply{Content: "One."}, msg("user", "First"))
	c.extra["id_slot"] = -1
	r2, b2 := c.turn(Reply{Content: "Two."}, msg("user", "Second"))
	if got, want := cacheN(r2), r1.total()-1; got != want {
		t.Errorf("cache_n = %d, want %d", got, want)
	}
	var last map[string]any
	if err := json.Unmarshal(srv.LastRequest(1), &last); err != nil || len(last["messages"].([]any)) != len(b2["messages"].([]map[string]any)) {
		t.Errorf("LastRequest(1) = %s, want the second request", srv.LastRequest(1))
	}
}

// TestMaxTokensStopsWithLength: max_tokens caps predicted_n and the finish
// reason is "length".
func TestMaxTokensStopsWithLength(t *testing.T) {
	srv := New(t, Options{})
	srv.Script(Reply{Reasoning: "a b c d e f", Content: "never"})
	res := stream(t, srv, chatBody([]map[string]any{msg("user", "x")}, map[string]any{"max_tokens": 3}))
	if res.finish != "length" || res.num(res.timings, "predicted_n") != 3 {
		t.Errorf("finish = %q, predicted_n = %d, want length and 3", res.finish, res.num(res.timings, "predicted_n"))
	}
	if got := res.message["reasoning_content"]; got != "a b" {
		t.Errorf("reasoning = %q, want the first 3 tokens %q", got, "a b")
	}
}

func getJSON(t testing.TB, url string, out any) int {
	t.Helper()
	status, body := getBody(t, url)
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: decode %q: %v", url, body, err)
	}
	return status
}
