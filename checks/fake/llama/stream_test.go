package llama

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBusySlotQueuesWithoutBytes: a request pinned to a busy slot gets no
// bytes at all, not even a status line, until the slot frees.
func TestBusySlotQueuesWithoutBytes(t *testing.T) {
	srv := New(t, Options{})
	srv.Script(Reply{Content: strings.Repeat("x ", 40), TokenDelay: 20 * time.Millisecond}, Reply{Content: "Second."})
	a := post(t, srv.URL()+"/v1/chat/completions", chatBody([]map[string]any{msg("user", "A")}, map[string]any{"id_slot": 0}))
	defer a.Body.Close()

	// B is sent on a raw connection so that any byte, even a partial
	// header, would be seen. id_slot 2 wraps to slot 0.
	u, _ := url.Parse(srv.URL())
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := mustJSON(t, chatBody([]map[string]any{msg("user", "B")}, map[string]any{"id_slot": 2}))
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.Host, len(body), body)

	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("queued request read %d bytes (err %v) while the slot was busy, want none", n, err)
	}
	var slots []map[string]any
	getJSON(t, srv.URL()+"/slots", &slots)
	if slots[0]["is_processing"] != true || slots[1]["is_processing"] == true {
		t.Errorf("/slots = %v, want slot 0 processing and slot 1 idle", slots)
	}
	if getStatus(t, srv.URL()+"/slots?fail_on_no_slot=1") != http.StatusOK {
		t.Errorf("fail_on_no_slot=1 failed although slot 1 is idle")
	}

	first := assemble(t, readEvents(t, a.Body))
	if !first.done {
		t.Fatalf("first stream did not finish")
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("queued request: %v", err)
	}
	defer resp.Body.Close()
	second := assemble(t, readEvents(t, resp.Body))
	if resp.StatusCode != http.StatusOK || second.message["content"] != "Second." || !second.done {
		t.Errorf("queued request = %d %v, want 200 and the second reply", resp.StatusCode, second.message)
	}
}

func getStatus(t testing.TB, url string) int {
	status, _ := getBody(t, url)
	return status
}

// tap reads a stream line by line, keeping every line so that the whole
// stream can be assembled once it ends.
type tap struct {
	sc    *bufio.Scanner
	lines strings.Builder
}

func newTap(r io.Reader) *tap { return &tap{sc: bufio.NewScanner(r)} }

// until reads events until one satisfies ok.
func (tp *tap) until(t *testing.T, ok func(chunkJSON) bool) chunkJSON {
	t.Helper()
	for tp.sc.Scan() {
		tp.lines.WriteString(tp.sc.Text() + "\n")
		line, found := strings.CutPrefix(tp.sc.Text(), "data: ")
		if !found || line == "[DONE]" {
			continue
		}
		var c chunkJSON
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		if ok(c) {
			return c
		}
	}
	t.Fatalf("stream ended before the awaited chunk")
	return chunkJSON{}
}

// rest reads to the end and assembles everything read.
func (tp *tap) rest(t *testing.T) result {
	t.Helper()
	for tp.sc.Scan() {
		tp.lines.WriteString(tp.sc.Text() + "\n")
	}
	return assemble(t, readEvents(t, strings.NewReader(tp.lines.String())))
}

func isReasoning(c chunkJSON) bool {
	return len(c.Choices) > 0 && c.Choices[0].Delta.ReasoningContent != nil
}

func control(t *testing.T, srv *Server, id string) (int, controlResult) {
	t.Helper()
	var out controlResult
	status := postJSON(t, srv.URL()+"/v1/chat/completions/control",
		map[string]any{"id": id, "action": "reasoning_end", "model": "fake-model"}, &out)
	return status, out
}

// TestControlEndsReasoning: a reasoning_end during an armed reasoning stream
// forces the budget message and </think>; the model moves on to its answer.
// Replaying that reply costs a re-read of the turn, back to the checkpoint.
func TestControlEndsReasoning(t *testing.T) {
	srv := New(t, Options{})
	c := newConversation(t, srv)
	c.extra["reasoning_control"] = true
	c.extra["reasoning_budget_message"] = " Enough."
	c.msgs = []map[string]any{msg("user", "Think hard")}
	body := chatBody(c.msgs, c.extra)
	srv.Script(Reply{Reasoning: "Hmm", ThinkTokens: 100000, TokenDelay: time.Millisecond, Content: "Done thinking."})
	resp := post(t, srv.URL()+"/v1/chat/completions", body)
	defer resp.Body.Close()
	tp := newTap(resp.Body)
	id := tp.until(t, isReasoning).ID

	if status, got := control(t, srv, id); status != http.StatusOK || got != (controlResult{Success: true}) {
		t.Fatalf("control during reasoning = %d %+v, want success", status, got)
	}
	// The control may land before or after the first "." think token
	// (under load, right after "Hmm"): only the order is fixed.
	res := tp.rest(t)
	if res.message["content"] != "Done thinking." || res.finish != "stop" || !res.done {
		t.Errorf("after control: content %q, finish %q, done %v; want the answer, stop, [DONE]", res.message["content"], res.finish, res.done)
	}
	if got := res.message["reasoning_content"].(string); !strings.HasPrefix(got, "Hmm") || !strings.HasSuffix(got, " Enough.") {
		t.Errorf("reasoning after control ends %q, want the budget message", got)
	}
	if n := res.num(res.timings, "predicted_n"); n > 50000 {
		t.Errorf("predicted_n = %d, want reasoning cut well short of 100000", n)
	}

	if _, got := control(t, srv, id); got.Success || got.Message != "no active completion for this id" {
		t.Errorf("control after the stream = %+v, want no active completion", got)
	}
	if got := srv.ControlCalls(); got != 2 {
		t.Errorf("ControlCalls() = %d, want 2", got)
	}

	// The forced end is not what the template renders (no newline before
	// </think>), so the next turn re-reads from the checkpoint before the
	// end of the previous prompt.
	c.msgs = append(c.msgs, res.message)
	r2, _ := c.turn(Reply{Content: "Two."}, msg("user", "Next"))
	if got, want := cacheN(r2), promptTokens(t, body)-4; got != want {
		t.Errorf("cache_n after a forced end = %d, want checkpoint %d", got, want)
	}
}

// TestControlNotArmed: without reasoning_control the call is refused.
func TestControlNotArmed(t *testing.T) {
	srv := New(t, Options{})
	srv.Script(Reply{ThinkTokens: 100000, TokenDelay: time.Millisecond})
	resp := post(t, srv.URL()+"/v1/chat/completions", chatBody([]map[string]any{msg("user", "x")}, nil))
	defer resp.Body.Close()
	id := newTap(resp.Body).until(t, isReasoning).ID
	if _, got := control(t, srv, id); got.Success || got.Message != "reasoning control not enabled for this completion" {
		t.Errorf("control on an unarmed stream = %+v, want not enabled", got)
	}
}

// TestReasoningBudgetTokens: the per-request budget ends reasoning after N
// tokens with the budget message.
func TestReasoningBudgetTokens(t *testing.T) {
	srv := New(t, Options{})
	srv.Script(Reply{Reasoning: "a b c d e", Content: "ok"})
	res := stream(t, srv, chatBody([]map[string]any{msg("user", "x")}, map[string]any{
		"reasoning_budget_tokens": 3, "reasoning_budget_message": "!",
	}))
	if got := res.message["reasoning_content"]; got != "a b!" {
		t.Errorf("reasoning = %q, want 3 tokens and the message %q", got, "a b!")
	}
}

// noThinking turns thinking off, so that generated tokens are the content's
// from the first one (otherwise the markup closing the thinking block, 4
// tokens, comes first).
var noThinking = map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}

// TestMidStreamError: an error event, then the stream closes with no [DONE].
func TestMidStreamError(t *testing.T) {
	srv := New(t, Options{})
	srv.Script(Reply{Content: "a b c d", ErrorAfter: 2, Error: &Error{Code: 500, Message: "boom", Type: "server_error"}})
	resp := post(t, srv.URL()+"/v1/chat/completions", chatBody([]map[string]any{msg("user", "x")}, noThinking))
	defer resp.Body.Close()
	events := readEvents(t, resp.Body)
	last := events[len(events)-1]
	if last.data != `{"error":{"code":500,"message":"boom","type":"server_error"}}` {
		t.Errorf("last event = %q, want the error object", last.data)
	}
	if res := assemble(t, events); res.done || res.message["content"] != "a " {
		t.Errorf("done = %v, content %q; want no [DONE] after 2 tokens", res.done, res.message["content"])
	}
}

// TestStallIsSilent: a stall sends nothing, not even pings.
func TestStallIsSilent(t *testing.T) {
	const stall = 250 * time.Millisecond
	srv := New(t, Options{PingInterval: 20 * time.Millisecond})
	srv.Script(Reply{Content: "a b", StallAfter: 1, Stall: stall})
	resp := post(t, srv.URL()+"/v1/chat/completions", chatBody([]map[string]any{msg("user", "x")}, noThinking))
	defer resp.Body.Close()
	events := readEvents(t, resp.Body)
	for i, e := range events {
		if e.comment {
			t.Fatalf("event %d is a ping during a stall", i)
		}
	}
	// events[0] and [1] are the role chunk and the first token, one write.
	if gap := events[2].at.Sub(events[1].at); gap < stall-20*time.Millisecond {
		t.Errorf("gap after the first token = %v, want the stall %v", gap, stall)
	}
}

// TestSlowStreamPings: a slow stream is kept alive with ":" comments, unless
// the request disables them with sse_ping_interval -1.
func TestSlowStreamPings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		pings bool
	}{
		{"default interval", nil, true},
		{"disabled by request", map[string]any{"sse_ping_interval": -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := New(t, Options{PingInterval: 30 * time.Millisecond})
			srv.Script(Reply{Content: "a b c", TokenDelay: 100 * time.Millisecond})
			resp := post(t, srv.URL()+"/v1/chat/completions", chatBody([]map[string]any{msg("user", "x")}, tc.extra))
			defer resp.Body.Close()
			n := 0
			for _, e := range readEvents(t, resp.Body) {
				if e.comment {
					n++
				}
			}
			if got := n >= 4; got != tc.pings {
				t.Errorf("%d pings, want pings = %v", n, tc.pings)
			}
		})
	}
}

// TestTimingsPerToken: every token chunk carries timings when asked.
func TestTimingsPerToken(t *testing.T) {
	srv := New(t, Options{})
	srv.Script(Reply{Content: "a b"})
	res := stream(t, srv, chatBody([]map[string]any{msg("user", "x")}, map[string]any{"timings_per_token": true}))
	for _, e := range res.events {
		if e.comment || e.data == "[DONE]" || strings.Contains(e.data, `"role"`) {
			continue
		}
		if !strings.Contains(e.data, `"timings"`) {
			t.Errorf("chunk without timings: %s", e.data)
		}
	}
}
