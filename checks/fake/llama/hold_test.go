package llama

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHoldPingsUntilReleased: a held reply sends its first tokens, then
// only pings until the test releases it, then the rest; the stream is the
// same as an unheld one's. The test releases it on the event itself, once
// it has read five pings (a fixed hold timed on a loaded machine saw four),
// or after 10 s, when too few came.
func TestHoldPingsUntilReleased(t *testing.T) {
	srv := New(t, Options{PingInterval: 20 * time.Millisecond})
	release := make(chan struct{})
	srv.Script(Reply{Content: "a b c", StallAfter: 1, Hold: release}, Reply{Content: "a b c"})
	body := chatBody([]map[string]any{msg("user", "x")}, noThinking)
	resp := post(t, srv.URL()+"/v1/chat/completions", body)
	defer resp.Body.Close()
	pc := &pingCounter{r: resp.Body, want: 5, release: release}
	late := time.AfterFunc(10*time.Second, pc.free)
	defer late.Stop()
	got := assemble(t, readEvents(t, pc))
	pc.mu.Lock()
	freed := pc.freed
	pc.mu.Unlock()
	if !freed {
		t.Errorf("the held stream ended before its release")
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
		t.Errorf("%d pings while held (10 s at most) at a 20 ms interval, want at least 5", pings)
	}
	want := stream(t, srv, body)
	if !got.done || got.message["content"] != want.message["content"] || got.finish != want.finish {
		t.Errorf("held stream = %v %q %q, want the unheld one's %q %q", got.done, got.message["content"], got.finish, want.message["content"], want.finish)
	}
}

// pingCounter reads a stream and frees release once it has passed want
// SSE comment lines (pings) on.
type pingCounter struct {
	r       io.Reader
	want    int
	release chan struct{}
	seen    int
	mu      sync.Mutex
	freed   bool
	line    []byte
}

func (p *pingCounter) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	for _, c := range b[:n] {
		if c != '\n' {
			p.line = append(p.line, c)
			continue
		}
		if len(p.line) > 0 && p.line[0] == ':' {
			if p.seen++; p.seen >= p.want {
				p.free()
			}
		}
		p.line = p.line[:0]
	}
	return n, err
}

func (p *pingCounter) free() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.freed {
		p.freed = true
		close(p.release)
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
