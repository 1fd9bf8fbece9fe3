package mattermost

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func get(t *testing.T, s *Server, path string, set func(*http.Request)) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL()+path, nil)
	set(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestAuth: app/authentication.go's four token sources, and the
// AppError of a bad one.
func TestAuth(t *testing.T) {
	s := New(t)
	u := s.AddUser("owner", false)
	for name, set := range map[string]func(*http.Request){
		"cookie":       func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "MMAUTHTOKEN", Value: u.Token}) },
		"bearer":       func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+u.Token) },
		"bearer case":  func(r *http.Request) { r.Header.Set("Authorization", "BEARER "+u.Token) },
		"token":        func(r *http.Request) { r.Header.Set("Authorization", "Token "+u.Token) },
		"access_token": func(r *http.Request) { q := r.URL.Query(); q.Set("access_token", u.Token); r.URL.RawQuery = q.Encode() },
	} {
		if code, body, _ := get(t, s, "/api/v4/users/me", set); code != 200 || !strings.Contains(body, u.ID) {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
	code, body, _ := get(t, s, "/api/v4/users/me", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") })
	var ae appError
	if code != 401 || json.Unmarshal([]byte(body), &ae) != nil || ae.ID != "api.context.session_expired.app_error" || ae.StatusCode != 401 {
		t.Errorf("bad token: %d %s", code, body)
	}
	s.Throttle(1)
	code, body, h := get(t, s, "/api/v4/users/me", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+u.Token) })
	if code != 429 || body != "limit exceeded\n" || h.Get("Retry-After") != "1" || h.Get("X-Ratelimit-Remaining") != "0" {
		t.Errorf("throttled: %d %q %v", code, body, h)
	}
}

type wsClient struct {
	t *testing.T
	c *websocket.Conn
}

func dialWS(t *testing.T, s *Server, token, query string) *wsClient {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + token}}
	u := "ws" + strings.TrimPrefix(s.URL(), "http") + "/api/v4/websocket" + query
	c, _, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t, c}
}

func (w *wsClient) next() map[string]any {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := w.c.Read(ctx)
	if err != nil {
		w.t.Fatalf("read: %v", err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func waitConns(t *testing.T, s *Server, n int) {
	for i := 0; s.Connections() != n; i++ {
		if i > 500 {
			t.Fatalf("connections = %d, want %d", s.Connections(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWebSocket: hello at seq 0, posted with data.post and
// data.mentions as strings, the author receiving its own post,
// membership filtering, resume without hello, and a new connection id
// when events were lost.
func TestWebSocket(t *testing.T) {
	s := New(t)
	bot := s.AddUser("boxmaker", true)
	owner := s.AddUser("owner", false)
	stranger := s.AddUser("stranger", false)
	dm := s.Direct(bot.ID, owner.ID)
	w := dialWS(t, s, bot.Token, "")
	hello := w.next()
	data := hello["data"].(map[string]any)
	connID, _ := data["connection_id"].(string)
	if hello["event"] != "hello" || hello["seq"].(float64) != 0 || connID == "" {
		t.Fatalf("hello = %v", hello)
	}
	other := dialWS(t, s, stranger.Token, "")
	other.next()
	if _, err := s.PostAs(owner.ID, Post{ChannelID: dm, Message: "hi"}); err != nil {
		t.Fatal(err)
	}
	ev := w.next()
	d := ev["data"].(map[string]any)
	post, isString := d["post"].(string)
	mentions, _ := d["mentions"].(string)
	if ev["event"] != "posted" || ev["seq"].(float64) != 1 || !isString || !strings.Contains(post, `"message":"hi"`) ||
		mentions != `["`+bot.ID+`"]` || d["channel_type"] != "D" || d["sender_name"] != "@owner" {
		t.Fatalf("posted = %v", ev)
	}
	if _, err := s.PostAs(bot.ID, Post{ChannelID: dm, Message: "answer"}); err != nil {
		t.Fatal(err)
	}
	ev = w.next()
	if d := ev["data"].(map[string]any); !strings.Contains(d["post"].(string), `"from_bot":"true"`) || d["mentions"] != nil {
		t.Errorf("own post = %v", ev)
	}
	// The stranger, not a member, got nothing: its next event is the
	// typing it causes... none; check with a short read.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	if _, _, err := other.c.Read(ctx); err == nil {
		t.Error("a non-member received a DM event")
	}
	cancel()

	// Resume: events while disconnected are replayed, no hello.
	s.Drop(false)
	s.PostAs(owner.ID, Post{ChannelID: dm, Message: "while away"})
	w = dialWS(t, s, bot.Token, "?connection_id="+connID+"&sequence_number=3")
	ev = w.next()
	if ev["event"] != "posted" || ev["seq"].(float64) != 3 {
		t.Fatalf("after resume: %v", ev)
	}
	// A sequence number still in the dead queue replays from there.
	waitConns(t, s, 1)
	s.Drop(false)
	w = dialWS(t, s, bot.Token, "?connection_id="+connID+"&sequence_number=2")
	if ev := w.next(); ev["seq"].(float64) != 2 || ev["event"] != "posted" {
		t.Fatalf("replay from the dead queue: %v", ev)
	}
	// Lost: a new connection id and a hello at seq 0.
	waitConns(t, s, 1)
	s.Drop(true)
	w = dialWS(t, s, bot.Token, "?connection_id="+connID+"&sequence_number=4")
	ev = w.next()
	if ev["event"] != "hello" || ev["seq"].(float64) != 0 || ev["data"].(map[string]any)["connection_id"] == connID {
		t.Fatalf("after losing the queues: %v", ev)
	}
}

// TestSendQueueOverflow: a disconnected connection that falls 256 events
// behind is removed; its reconnect gets a hello.
func TestSendQueueOverflow(t *testing.T) {
	s := New(t)
	bot := s.AddUser("boxmaker", true)
	owner := s.AddUser("owner", false)
	dm := s.Direct(bot.ID, owner.ID)
	w := dialWS(t, s, bot.Token, "")
	id := w.next()["data"].(map[string]any)["connection_id"].(string)
	waitConns(t, s, 1)
	s.Drop(false)
	for i := 0; i <= sendQueueSize; i++ {
		s.PostAs(owner.ID, Post{ChannelID: dm, Message: "x"})
	}
	w = dialWS(t, s, bot.Token, "?connection_id="+id+"&sequence_number=1")
	if ev := w.next(); ev["event"] != "hello" {
		t.Fatalf("after overflow: %v", ev)
	}
}

func TestCreatePostChecks(t *testing.T) {
	s := New(t)
	a := s.AddUser("a", false)
	b := s.AddUser("b", false)
	ch := s.AddChannel("O", "c", a.ID)
	if _, err := s.PostAs(b.ID, Post{ChannelID: ch, Message: "x"}); err == nil || err.(*appError).StatusCode != 403 {
		t.Errorf("non-member post: %v", err)
	}
	if _, err := s.PostAs(a.ID, Post{ChannelID: ch, Message: strings.Repeat("é", MaxPostSize+1)}); err == nil {
		t.Error("over-long post accepted")
	}
	root, _ := s.PostAs(a.ID, Post{ChannelID: ch, Message: "root"})
	reply, _ := s.PostAs(a.ID, Post{ChannelID: ch, RootID: root.ID, Message: "reply"})
	if _, err := s.PostAs(a.ID, Post{ChannelID: ch, RootID: reply.ID, Message: "nested"}); err == nil {
		t.Error("a reply to a reply accepted")
	}
	if len(newID()) != 26 {
		t.Error("ids are not 26 characters")
	}
}

// TestResumeWithLoss: a known connection asking for a seq the server
// cannot replay gets a new id and a hello, and the events queued while
// it was away still follow (writePump's hasMsgLoss branch).
func TestResumeWithLoss(t *testing.T) {
	s := New(t)
	bot := s.AddUser("boxmaker", true)
	owner := s.AddUser("owner", false)
	dm := s.Direct(bot.ID, owner.ID)
	w := dialWS(t, s, bot.Token, "")
	id := w.next()["data"].(map[string]any)["connection_id"].(string)
	waitConns(t, s, 1)
	s.Drop(false)
	s.PostAs(owner.ID, Post{ChannelID: dm, Message: "queued"})
	w = dialWS(t, s, bot.Token, "?connection_id="+id+"&sequence_number=99")
	h := w.next()
	if h["event"] != "hello" || h["seq"].(float64) != 0 || h["data"].(map[string]any)["connection_id"] == id {
		t.Fatalf("first = %v", h)
	}
	ev := w.next()
	if ev["event"] != "posted" || ev["seq"].(float64) != 1 || !strings.Contains(ev["data"].(map[string]any)["post"].(string), "queued") {
		t.Fatalf("then = %v", ev)
	}
}

// TestReservedPropsStripped: a client's post, over REST or PostAs, loses
// the props only integrations may set; PostAsWebhook keeps them.
func TestReservedPropsStripped(t *testing.T) {
	s := New(t)
	a := s.AddUser("a", false)
	ch := s.AddChannel("O", "c", a.ID)
	body := `{"channel_id":"` + ch + `","message":"hi","props":{"from_webhook":"true","override_username":"x","override_icon_url":"u","keep":"y"}}`
	req, _ := http.NewRequest("POST", s.URL()+"/api/v4/posts", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p Post
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %d %v", resp.StatusCode, err)
	}
	props := map[string]any{"from_webhook": "true", "override_username": "x"}
	viaTest, _ := s.PostAs(a.ID, Post{ChannelID: ch, Message: "hi", Props: props})
	for _, got := range []map[string]any{p.Props, viaTest.Props} {
		for _, k := range []string{"from_webhook", "override_username", "override_icon_url"} {
			if _, ok := got[k]; ok {
				t.Errorf("a client's post kept %s: %v", k, got)
			}
		}
	}
	if p.Props["keep"] != "y" {
		t.Errorf("an ordinary prop was dropped: %v", p.Props)
	}
	hook, _ := s.PostAsWebhook(a.ID, Post{ChannelID: ch, Message: "hi", Props: props})
	if hook.Props["from_webhook"] != "true" || hook.Props["override_username"] != "x" {
		t.Errorf("the webhook's props = %v", hook.Props)
	}
}
