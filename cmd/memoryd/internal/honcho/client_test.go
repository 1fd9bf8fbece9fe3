package honcho

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
)

func TestBatches(t *testing.T) {
	tg := fakeTarget(t, fake.Options{})
	var msgs []NewMessage
	for range 250 {
		msgs = append(msgs, NewMessage{Peer: honchoconf.MustID("u"), Content: "x"})
	}
	got, err := tg.client.AddMessages(context.Background(), honchoconf.MustID("w"), honchoconf.MustID("s"), msgs)
	if err != nil || len(got) != 250 {
		t.Fatalf("AddMessages = %d, %v", len(got), err)
	}
	var sizes []int
	for _, r := range tg.fake.Requests() {
		var b struct{ Messages []json.RawMessage }
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(b.Messages))
	}
	if len(sizes) != 3 || sizes[0] != 100 || sizes[1] != 100 || sizes[2] != 50 {
		t.Fatalf("batches = %v, want [100 100 50]", sizes)
	}
}

func TestRefusedBeforeSending(t *testing.T) {
	tg := fakeTarget(t, fake.Options{})
	c, ctx, w, s, p := tg.client, context.Background(), honchoconf.MustID("w"), honchoconf.MustID("s"), honchoconf.MustID("p")
	long := strings.Repeat("é", MaxContent+1)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"too long", func() error {
			_, err := c.AddMessages(ctx, w, s, []NewMessage{{Peer: p, Content: "ok"}, {Peer: p, Content: long}})
			return err
		}},
		{"nul", func() error {
			_, err := c.AddMessages(ctx, w, s, []NewMessage{{Peer: p, Content: "a\x00b"}})
			return err
		}},
		{"utf8", func() error { _, err := c.AddMessages(ctx, w, s, []NewMessage{{Peer: p, Content: "\xff"}}); return err }},
		{"no peer", func() error { _, err := c.AddMessages(ctx, w, s, []NewMessage{{Content: "x"}}); return err }},
		{"none", func() error { _, err := c.AddMessages(ctx, w, s, nil); return err }},
		{"zero workspace", func() error { _, err := c.Workspace(ctx, honchoconf.ID{}); return err }},
		{"zero session", func() error { _, err := c.Session(ctx, w, honchoconf.ID{}, nil); return err }},
		{"no peers", func() error { _, err := c.AddPeers(ctx, w, s, nil); return err }},
		{"limit 0", func() error { _, err := c.Search(ctx, Search{Workspace: w}, "q", 0); return err }},
		{"limit 101", func() error { _, err := c.Search(ctx, Search{Workspace: w}, "q", MaxLimit+1); return err }},
		{"empty query", func() error { _, err := c.Search(ctx, Search{Workspace: w}, "", 5); return err }},
		{"two scopes", func() error { _, err := c.Search(ctx, Search{Workspace: w, Session: s, Peer: p}, "q", 5); return err }},
		{"chat empty", func() error { _, err := c.Chat(ctx, w, p, Question{}); return err }},
		{"chat long", func() error {
			_, err := c.Chat(ctx, w, p, Question{Query: strings.Repeat("q", MaxQuery+1)})
			return err
		}},
		{"chat level", func() error { _, err := c.Chat(ctx, w, p, Question{Query: "q", Reasoning: "huge"}); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrRefused) {
				t.Fatalf("err = %v, want ErrRefused", err)
			}
		})
	}
	if n := len(tg.fake.Requests()); n != 0 {
		t.Fatalf("%d requests reached Honcho, want none", n)
	}
}

func TestKey(t *testing.T) {
	f := fake.New(t, fake.Options{Key: "k-secret"})
	_, err := clientFor(t, f.URL, "", honchoconf.DefaultTimeout).Workspace(context.Background(), honchoconf.MustID("w"))
	var ae *APIError
	if !errors.Is(err, ErrAuth) || !errors.As(err, &ae) || ae.Detail != "No access token provided" {
		t.Fatalf("no key: %v, want 401 No access token provided", err)
	}
	_, err = clientFor(t, f.URL, "k-wrong", honchoconf.DefaultTimeout).Workspace(context.Background(), honchoconf.MustID("w"))
	if !errors.Is(err, ErrAuth) || strings.Contains(err.Error(), "k-wrong") {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := clientFor(t, f.URL, "k-secret", honchoconf.DefaultTimeout).Workspace(context.Background(), honchoconf.MustID("w")); err != nil {
		t.Fatal(err)
	}
	if rs := f.Requests(); len(rs) != 3 || rs[0].Authorized || rs[1].Authorized || !rs[2].Authorized {
		t.Fatalf("requests = %+v", rs)
	}
}

func TestTimeoutAndFailure(t *testing.T) {
	tg := fakeTarget(t, fake.Options{})
	c := clientFor(t, tg.fake.URL, "", honchoconf.MinTimeout)
	tg.fake.SetDelay(2 * time.Second)
	start := time.Now()
	_, err := c.Workspace(context.Background(), honchoconf.MustID("w"))
	if !errors.Is(err, ErrUnreachable) || time.Since(start) > time.Second {
		t.Fatalf("slow Honcho: %v after %v, want ErrUnreachable within the timeout", err, time.Since(start))
	}
	tg.fake.SetDelay(0)
	tg.fake.SetFailure(http.StatusServiceUnavailable)
	if _, err := c.Workspace(context.Background(), honchoconf.MustID("w")); !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "An unexpected error occurred") {
		t.Fatalf("failing Honcho: %v, want ErrServer", err)
	}
}

// hostile answers every request with one canned response.
func hostile(t *testing.T, status int, ctype, body string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status == http.StatusFound {
			http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", status)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return clientFor(t, srv.URL, "", honchoconf.DefaultTimeout)
}

const goodWS = `{"id":"w","metadata":{},"configuration":{},"created_at":"2025-01-01T00:00:00Z"}`

func TestUndecodable(t *testing.T) {
	ctx := context.Background()
	if _, err := hostile(t, 201, "application/json", goodWS).Workspace(ctx, honchoconf.MustID("w")); err != nil {
		t.Fatalf("good answer refused: %v", err)
	}
	for _, tc := range []struct{ name, ctype, body string }{
		{"extra field", "application/json", strings.Replace(goodWS, `"id"`, `"x":1,"id"`, 1)},
		{"missing field", "application/json", `{"id":"w","metadata":{},"configuration":{}}`},
		{"case", "application/json", strings.Replace(goodWS, `"id"`, `"honchoconf.ID"`, 1)},
		{"duplicate", "application/json", strings.Replace(goodWS, `"id":"w"`, `"id":"w","id":"w"`, 1)},
		{"trailing", "application/json", goodWS + `{}`},
		{"other id", "application/json", strings.Replace(goodWS, `"id":"w"`, `"id":"v"`, 1)},
		{"bad id", "application/json", strings.Replace(goodWS, `"id":"w"`, `"id":"w w"`, 1)},
		{"metadata list", "application/json", strings.Replace(goodWS, `"metadata":{}`, `"metadata":[]`, 1)},
		{"time", "application/json", strings.Replace(goodWS, `2025-01-01T00:00:00Z`, `yesterday`, 1)},
		{"html", "text/html", goodWS},
		{"too large", "application/json", `{"id":"` + strings.Repeat("w", MaxResponse) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := hostile(t, 201, tc.ctype, tc.body).Workspace(ctx, honchoconf.MustID("w"))
			if !errors.Is(err, ErrUndecodable) || !w.ID.IsZero() {
				t.Fatalf("Workspace = %+v, %v; want ErrUndecodable and nothing", w, err)
			}
		})
	}
	msg := `{"id":"m1","content":"%s","peer_id":"p","session_id":"%s","metadata":{},"created_at":"2025-01-01T00:00:00.123456Z","workspace_id":"w","token_count":1}`
	one := func(content, session string) string {
		return "[" + strings.Replace(strings.Replace(msg, "%s", content, 1), "%s", session, 1) + "]"
	}
	if _, err := hostile(t, 201, "application/json", one("hi", "s")).AddMessages(ctx, honchoconf.MustID("w"), honchoconf.MustID("s"), []NewMessage{{Peer: honchoconf.MustID("p"), Content: "hi"}}); err != nil {
		t.Fatalf("good batch refused: %v", err)
	}
	if got, err := hostile(t, 201, "application/json", one("altered", "s")).AddMessages(ctx, honchoconf.MustID("w"), honchoconf.MustID("s"), []NewMessage{{Peer: honchoconf.MustID("p"), Content: "hi"}}); !errors.Is(err, ErrUndecodable) || len(got) != 0 {
		t.Fatalf("altered batch: %v, %d messages", err, len(got))
	}
	if _, err := hostile(t, 200, "application/json", one("hi", "other")).Search(ctx, Search{Workspace: honchoconf.MustID("w"), Session: honchoconf.MustID("s")}, "hi", 5); !errors.Is(err, ErrUndecodable) {
		t.Fatalf("hit outside the session searched: %v", err)
	}
	if _, err := hostile(t, 200, "application/json", `{"content":1}`).Chat(ctx, honchoconf.MustID("w"), honchoconf.MustID("p"), Question{Query: "q"}); !errors.Is(err, ErrUndecodable) {
		t.Fatalf("chat number: %v", err)
	}
	if _, err := hostile(t, http.StatusFound, "", "").Workspace(ctx, honchoconf.MustID("w")); !errors.Is(err, ErrUnexpected) {
		t.Fatalf("redirect: %v, want ErrUnexpected (not followed)", err)
	}
	_, err := hostile(t, 502, "text/html", "<html>bad gateway</html>").Workspace(ctx, honchoconf.MustID("w"))
	var ae *APIError
	if !errors.As(err, &ae) || ae.Shaped || !errors.Is(err, ErrServer) || strings.Contains(err.Error(), "html") {
		t.Fatalf("proxy page: %v", err)
	}
}

func TestDecodeError(t *testing.T) {
	for _, tc := range []struct {
		body, detail string
		fields       []string
	}{
		{`{"detail":"Session s not found in workspace w"}`, "Session s not found in workspace w", nil},
		{`{"detail":"line\nbreak\u001b[31m"}`, "line break [31m", nil},
		{`{"detail":[{"type":"string_too_long","loc":["body","messages",0,"content"],"msg":"String should have at most 25000 characters","input":"private text","ctx":{"max_length":25000}}]}`,
			"String should have at most 25000 characters", []string{"body.messages.0.content"}},
	} {
		e := DecodeError("op", 422, []byte(tc.body))
		if !e.Shaped || e.Detail != tc.detail || strings.Join(e.Fields, ",") != strings.Join(tc.fields, ",") || strings.Contains(e.Error(), "private text") {
			t.Errorf("DecodeError(%s) = %+v", tc.body, e)
		}
	}
	if e := DecodeError("op", 500, []byte(`{"detail":{"x":1}}`)); e.Shaped || e.Detail != "" {
		t.Errorf("odd detail decoded: %+v", e)
	}
}
