package mattermost

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// dialBare opens a WebSocket with no token (the official client's way).
func dialBare(t *testing.T, s *Server, query string) *wsClient {
	t.Helper()
	u := "ws" + strings.TrimPrefix(s.URL(), "http") + "/api/v4/websocket" + query
	c, _, err := websocket.Dial(context.Background(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t, c}
}

func (w *wsClient) send(v string) {
	w.t.Helper()
	if err := w.c.Write(context.Background(), websocket.MessageText, []byte(v)); err != nil {
		w.t.Fatal(err)
	}
}

// closed reports whether the server closed the socket within 6 s.
func (w *wsClient) closed() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	for {
		if _, _, err := w.c.Read(ctx); err != nil {
			return ctx.Err() == nil
		}
	}
}

// TestChallenge: websocket_router.go's authentication_challenge path.
func TestChallenge(t *testing.T) {
	s := New(t)
	u := s.AddUser("owner", false)
	other := s.AddUser("other", false)
	ch := s.Direct(u.ID, other.ID)

	w := dialBare(t, s, "?connection_id=&sequence_number=0")
	w.send(`{"seq":1,"action":"ping","data":{}}`)
	if e := w.next(); e["status"] != "FAIL" || e["seq_reply"] != 1.0 || e["error"].(map[string]any)["id"] != "api.web_socket_router.not_authenticated.app_error" {
		t.Fatalf("a request before the challenge: %v", e)
	}
	w.send(`{"seq":0,"action":"authentication_challenge","data":{"token":"x"}}`)
	if e := w.next(); e["error"].(map[string]any)["id"] != "api.web_socket_router.bad_seq.app_error" {
		t.Fatalf("seq 0: %v", e)
	}
	w.send(`{"seq":2,"action":"authentication_challenge","data":{"token":"` + u.Token + `"}}`)
	if e := w.next(); e["event"] != "hello" || e["seq"] != 0.0 {
		t.Fatalf("after the challenge, first: %v", e)
	}
	if e := w.next(); e["status"] != "OK" || e["seq_reply"] != 2.0 || e["event"] != nil {
		t.Fatalf("the challenge's reply: %v", e)
	}
	w.send(`{"seq":3,"action":"ping"}`)
	if e := w.next(); e["status"] != "OK" || e["data"].(map[string]any)["text"] != "pong" {
		t.Fatalf("ping: %v", e)
	}
	w.send(`{"seq":4,"action":"user_typing","data":{"channel_id":"` + ch + `","parent_id":""}}`)
	if e := w.next(); e["status"] != "OK" || e["seq_reply"] != 4.0 {
		t.Fatalf("user_typing: %v", e)
	}
	if ty := s.Typings(); len(ty) != 1 || ty[0].UserID != u.ID || ty[0].ChannelID != ch {
		t.Fatalf("typings = %+v", ty)
	}
	w.send(`{"seq":5,"action":"user_typing","data":{"channel_id":"aaaaaaaaaaaaaaaaaaaaaaaaaa"}}`)
	if e := w.next(); e["error"].(map[string]any)["id"] != "api.websocket_handler.invalid_param.app_error" {
		t.Fatalf("user_typing elsewhere: %v", e)
	}
	w.send(`{"seq":6,"action":"nonsense"}`)
	if e := w.next(); e["error"].(map[string]any)["id"] != "api.web_socket_router.bad_action.app_error" {
		t.Fatalf("unknown action: %v", e)
	}
	var actions []string
	for _, r := range s.Recorded() {
		if r.Method == "WS" {
			actions = append(actions, r.Path+"/"+r.Auth)
		}
	}
	if strings.Join(actions, " ") != "ping/ authentication_challenge/ authentication_challenge/ ping/challenge user_typing/challenge user_typing/challenge nonsense/challenge" {
		t.Fatalf("recorded actions = %v", actions)
	}

	// A bad token, or none, closes the socket; so does silence (5 s).
	bad := dialBare(t, s, "")
	bad.send(`{"seq":1,"action":"authentication_challenge","data":{"token":"nope"}}`)
	if !bad.closed() {
		t.Error("a bad challenge token left the socket open")
	}
	quiet := dialBare(t, s, "")
	if !quiet.closed() {
		t.Error("an unauthenticated socket stayed open past authCheckInterval")
	}
	// A token in the header that names no session is refused before the
	// upgrade.
	u2 := "ws" + strings.TrimPrefix(s.URL(), "http") + "/api/v4/websocket"
	if _, resp, err := websocket.Dial(context.Background(), u2, &websocket.DialOptions{HTTPHeader: map[string][]string{"Authorization": {"Bearer nope"}}}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("bad header token: %v %v", resp, err)
	}
}

// TestPaging: getPostsForChannel without since, or with since 0, pages.
func TestPaging(t *testing.T) {
	s := New(t)
	u := s.AddUser("owner", false)
	ch := s.AddChannel("O", "town", u.ID)
	var ids []string
	for i := range 70 {
		p, err := s.PostAs(u.ID, Post{ChannelID: ch, Message: "m"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
		if i == 69 {
			s.mu.Lock()
			s.posts[p.ID].DeleteAt = 1 // deleted: left out of pages
			s.mu.Unlock()
		}
	}
	auth := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+u.Token) }
	page := func(q string) postList {
		t.Helper()
		code, body, _ := get(t, s, "/api/v4/channels/"+ch+"/posts"+q, auth)
		var l postList
		if code != 200 || json.Unmarshal([]byte(body), &l) != nil {
			t.Fatalf("%s: %d %s", q, code, body)
		}
		return l
	}
	if l := page(""); len(l.Order) != 60 || l.Order[0] != ids[68] {
		t.Errorf("default page: %d posts, first %s, want 60 from %s", len(l.Order), l.Order[0], ids[68])
	}
	if l := page("?since=0&page=1&per_page=50"); len(l.Order) != 19 || l.Order[18] != ids[0] {
		t.Errorf("page 1 of 50: %d posts", len(l.Order))
	}
	if l := page("?per_page=500"); len(l.Order) != 69 {
		t.Errorf("per_page over the maximum: %d posts", len(l.Order))
	}
	if l := page("?since=1"); len(l.Order) != 70 {
		t.Errorf("since 1: %d posts, want every one, the deleted included", len(l.Order))
	}
	for _, q := range []string{"?page=x", "?per_page=-1", "?since=x"} {
		if code, _, _ := get(t, s, "/api/v4/channels/"+ch+"/posts"+q, auth); code != 400 {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
}
