package honcho

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

type answer struct {
	status int
	body   string
}

func post(t *testing.T, s *Server, path, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

func (a answer) want(t *testing.T, status int, sub ...string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
	}
	for _, s := range sub {
		if !strings.Contains(a.body, s) {
			t.Fatalf("body %s lacks %q", a.body, s)
		}
	}
}

func TestGetOrCreate(t *testing.T) {
	s := New(t, Options{})
	post(t, s, "/v3/workspaces", `{"id":"w1"}`).want(t, 201, `"id":"w1"`, `"metadata":{}`, `"configuration":{}`, `"created_at":"`)
	post(t, s, "/v3/workspaces", `{"id":"w1"}`).want(t, 200)
	post(t, s, "/v3/workspaces/w1/peers", `{"id":"p1"}`).want(t, 201, `"workspace_id":"w1"`)
	post(t, s, "/v3/workspaces/w1/peers", `{"id":"p1"}`).want(t, 200)
	// A peer's workspace is created on demand (crud/peer.py line 280).
	post(t, s, "/v3/workspaces/w2/peers", `{"id":"p1"}`).want(t, 201)
	post(t, s, "/v3/workspaces", `{"id":"w2"}`).want(t, 200)
	post(t, s, "/v3/workspaces/w1/sessions", `{"id":"s1","peers":{"p1":{"observe_me":true,"observe_others":false}}}`).want(t, 201, `"is_active":true`)
	post(t, s, "/v3/workspaces/w1/sessions", `{"id":"s1"}`).want(t, 200)
	post(t, s, "/v3/workspaces/w1/sessions/s1/peers", `{"p2":{}}`).want(t, 200, `"id":"s1"`)
	// Extra keys are ignored, as pydantic's BaseModel does.
	post(t, s, "/v3/workspaces", `{"id":"w3","extra":1}`).want(t, 201)
}

func TestValidation(t *testing.T) {
	s := New(t, Options{})
	for _, tc := range []struct {
		name, path, body string
		sub              []string
	}{
		{"pattern", "/v3/workspaces", `{"id":"a b"}`, []string{`"type":"string_pattern_mismatch"`, `"loc":["body","id"]`, `"ctx":{"pattern":"^[a-zA-Z0-9_-]+$"}`}},
		{"empty id", "/v3/workspaces", `{"id":""}`, []string{`"type":"string_too_short"`}},
		{"long id", "/v3/workspaces", `{"id":"` + strings.Repeat("a", 513) + `"}`, []string{`"type":"string_too_long"`, `"max_length":512`}},
		{"missing id", "/v3/workspaces/w/peers", `{}`, []string{`"type":"missing"`, `"msg":"Field required"`}},
		{"not json", "/v3/workspaces", `{`, []string{`"type":"json_invalid"`}},
		{"empty batch", "/v3/workspaces/w/sessions/s/messages", `{"messages":[]}`, []string{`"type":"too_short"`}},
		{"big batch", "/v3/workspaces/w/sessions/s/messages", batch(101, "x"), []string{`"type":"too_long"`, `not 101`}},
		{"long content", "/v3/workspaces/w/sessions/s/messages", batch(1, strings.Repeat("é", maxContent+1)), []string{`"type":"string_too_long"`, `"loc":["body","messages",0,"content"]`}},
		{"search limit", "/v3/workspaces/w/search", `{"query":"x","limit":101}`, []string{`"type":"less_than_equal"`}},
		{"search limit 0", "/v3/workspaces/w/search", `{"query":"x","limit":0}`, []string{`"type":"greater_than_equal"`}},
		{"search no query", "/v3/workspaces/w/search", `{}`, []string{`"type":"missing"`}},
		{"chat empty", "/v3/workspaces/w/peers/p/chat", `{"query":""}`, []string{`"type":"string_too_short"`}},
		{"chat long", "/v3/workspaces/w/peers/p/chat", `{"query":"` + strings.Repeat("q", maxQuery+1) + `"}`, []string{`"type":"string_too_long"`}},
		{"chat level", "/v3/workspaces/w/peers/p/chat", `{"query":"q","reasoning_level":"huge"}`, []string{`"type":"literal_error"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			post(t, s, tc.path, tc.body).want(t, 422, append([]string{`{"detail":[{`}, tc.sub...)...)
		})
	}
	// A bad peer name in a batch is crud's ValidationException: a string.
	post(t, s, "/v3/workspaces/w/sessions/s/messages", `{"messages":[{"content":"x","peer_id":"a b"}]}`).want(t, 422, `{"detail":"Invalid peer name`)
	post(t, s, "/v3/nope", `{}`).want(t, 404, `{"detail":"Not Found"}`)
	if n := len(s.Messages()); n != 0 {
		t.Fatalf("%d messages stored after refusals, want 0", n)
	}
}

func batch(n int, content string) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf(`{"content":%q,"peer_id":"p%d"}`, content, i%3))
	}
	return `{"messages":[` + strings.Join(parts, ",") + `]}`
}

func TestObserverLimit(t *testing.T) {
	s := New(t, Options{})
	var peers []string
	for i := range maxObservers + 1 {
		peers = append(peers, fmt.Sprintf(`"p%d":{"observe_others":true}`, i))
	}
	post(t, s, "/v3/workspaces/w/sessions", `{"id":"s","peers":{`+strings.Join(peers, ",")+`}}`).want(t, 400, "Maximum allowed is 10 observers")
	post(t, s, "/v3/workspaces/w/sessions", `{"id":"s","peers":{`+strings.Join(peers[1:], ",")+`}}`).want(t, 201)
}

func TestAuth(t *testing.T) {
	s := New(t, Options{Key: "k1"})
	post(t, s, "/v3/workspaces", `{"id":"w"}`).want(t, 401, `{"detail":"No access token provided"}`)
	post(t, s, "/v3/workspaces", `{"id":"w"}`, "Authorization", "Bearer k2").want(t, 401, `{"detail":"Invalid JWT"}`)
	post(t, s, "/v3/workspaces", `{"id":"w"}`, "Authorization", "Bearer k1").want(t, 201)
	resp, err := http.Get(s.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != `{"status":"ok"}` {
		t.Fatalf("health = %d %s", resp.StatusCode, b)
	}
	rs := s.Requests()
	if len(rs) != 3 || rs[0].Authorized || rs[1].Authorized || !rs[2].Authorized || string(rs[2].Body) != `{"id":"w"}` || rs[2].Path != "/v3/workspaces" {
		t.Fatalf("requests = %+v", rs)
	}
}

func TestMessagesSearchAndPages(t *testing.T) {
	s := New(t, Options{})
	post(t, s, "/v3/workspaces/w/sessions/s/messages", `{"messages":[{"content":"Apple\u0000 pie","peer_id":"u","metadata":{"k":"v"}},{"content":"banana","peer_id":"a","created_at":"2025-01-01T00:00:00Z"}]}`).
		want(t, 201, `"content":"Apple pie"`, `"metadata":{"k":"v"}`, `"created_at":"2025-01-01T00:00:00Z"`, `"token_count":3`, `"session_id":"s"`)
	post(t, s, "/v3/workspaces/w/sessions/s2/messages", `{"messages":[{"content":"apple tart","peer_id":"a"}]}`).want(t, 201)
	post(t, s, "/v3/workspaces/other/sessions/s/messages", `{"messages":[{"content":"apple","peer_id":"a"}]}`).want(t, 201)
	var hits []messageOut
	decode(t, post(t, s, "/v3/workspaces/w/search", `{"query":"APPLE"}`), &hits)
	if len(hits) != 2 || hits[0].Content != "Apple pie" || hits[1].Content != "apple tart" {
		t.Fatalf("workspace search = %+v", hits)
	}
	decode(t, post(t, s, "/v3/workspaces/w/search", `{"query":"apple","limit":1}`), &hits)
	if len(hits) != 1 {
		t.Fatalf("limit 1 gave %d hits", len(hits))
	}
	decode(t, post(t, s, "/v3/workspaces/w/sessions/s2/search", `{"query":"apple"}`), &hits)
	if len(hits) != 1 || hits[0].SessionID != "s2" {
		t.Fatalf("session search = %+v", hits)
	}
	decode(t, post(t, s, "/v3/workspaces/w/peers/u/search", `{"query":"apple"}`), &hits)
	if len(hits) != 1 || hits[0].PeerID != "u" {
		t.Fatalf("peer search = %+v", hits)
	}
	post(t, s, "/v3/workspaces/w/search", `{"query":"cherry"}`).want(t, 200)
	if a := post(t, s, "/v3/workspaces/w/search", `{"query":"cherry"}`); a.body != "[]" {
		t.Fatalf("no hits = %s, want []", a.body)
	}
	for i := range 5 {
		post(t, s, "/v3/workspaces/w/sessions/p/messages", fmt.Sprintf(`{"messages":[{"content":"m%d","peer_id":"u"}]}`, i)).want(t, 201)
	}
	var page struct {
		Items                    []messageOut
		Total, Page, Size, Pages int
	}
	decode(t, post(t, s, "/v3/workspaces/w/sessions/p/messages/list?page=2&size=2", `{}`), &page)
	if page.Total != 5 || page.Page != 2 || page.Size != 2 || page.Pages != 3 || len(page.Items) != 2 || page.Items[0].Content != "m2" {
		t.Fatalf("page = %+v", page)
	}
	post(t, s, "/v3/workspaces/w/sessions/p/messages/list?size=101", `{}`).want(t, 422, `"loc":["query","size"]`)
}

func decode(t *testing.T, a answer, v any) {
	t.Helper()
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if err := json.Unmarshal([]byte(a.body), v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

func TestChat(t *testing.T) {
	s := New(t, Options{Chat: func(c ChatCall) *string {
		if c.Query == "nothing" {
			return nil
		}
		a := fmt.Sprintf("%s/%s at %s asked %s", c.Workspace, c.Peer, c.Reasoning, c.Query)
		return &a
	}})
	post(t, s, "/v3/workspaces/w/peers/p/chat", `{"query":"hi","stream":false,"reasoning_level":"max"}`).want(t, 200, `{"content":"w/p at max asked hi"}`)
	post(t, s, "/v3/workspaces/w/peers/p/chat", `{"query":"nothing"}`).want(t, 200, `{"content":null}`)
	post(t, s, "/v3/workspaces/w/peers/p/chat", `{"query":"hi","stream":true}`).want(t, 200, `data: {"delta":{"content":"w/p at low asked hi"},"done":false}`, `data: {"done": true}`)
	// The peer was created by the question.
	post(t, s, "/v3/workspaces/w/peers", `{"id":"p"}`).want(t, 200)
}

func TestFailure(t *testing.T) {
	s := New(t, Options{})
	s.SetFailure(503)
	post(t, s, "/v3/workspaces", `{"id":"w"}`).want(t, 503, `{"detail":"An unexpected error occurred"}`)
	s.SetFailure(0)
	post(t, s, "/v3/workspaces", `{"id":"w"}`).want(t, 201)
}
