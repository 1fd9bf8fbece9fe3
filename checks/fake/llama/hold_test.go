package llama

import (
	"strings"
	"testing"
	"time"
)

// TestHoldPingsUntilReleased: a held reply sends its first tokens, then
// only pings until the test releases it, then the rest; the stream is the
// same as an unheld one's.
func TestHoldPingsUntilReleased(t *testing.T) {
	srv := New(t, Options{PingInterval: 20 * time.Millisecond})
	release := make(chan struct{})
	srv.Script(Reply{Content: "a b c", StallAfter: 1, Hold: release}, Reply{Content: "a b c"})
	const held = 300 * time.Millisecond
	go func() { time.Sleep(held); close(release) }()
	body := chatBody([]map[string]any{msg("user", "x")}, noThinking)
	began := time.Now()
	got := stream(t, srv, body)
	if took := time.Since(began); took < held {
		t.Errorf("the held stream ended after %v, before its release at %v", took, held)
	}
	var pings int
	for i, e := range got.events {
		if e.comment {
			pings++
			if i < 1 {
				t.Errorf("a ping before the first token: %v", got.events)
			}
		}
	}
	if pings < 5 {
		t.Errorf("%d pings while held %v at a 20 ms interval, want at least 5", pings, held)
	}
	want := stream(t, srv, body)
	if !got.done || got.message["content"] != want.message["content"] || got.finish != want.finish {
		t.Errorf("held stream = %v %q %q, want the unheld one's %q %q", got.done, got.message["content"], got.finish, want.message["content"], want.finish)
	}
}

// TestRespondChoosesByBody: a chooser answers the requests it recognises,
// and the script's queue is left to the others, in order.
func TestRespondChoosesByBody(t *testing.T) {
	srv := New(t, Options{})
	srv.Script(Reply{Content: "first scripted"}, Reply{Content: "second scripted"})
	srv.Respond(func(body []byte) (Reply, bool) {
		if strings.Contains(string(body), "marker") {
			return Reply{Content: "chosen"}, true
		}
		return Reply{}, false
	})
	for _, tc := range []struct{ ask, want string }{
		{"plain", "first scripted"},
		{"with the marker", "chosen"},
		{"plain again", "second scripted"},
	} {
		r := stream(t, srv, chatBody([]map[string]any{msg("user", tc.ask)}, noThinking))
		if r.message["content"] != tc.want {
			t.Errorf("%q was answered %q, want %q", tc.ask, r.message["content"], tc.want)
		}
	}
}
