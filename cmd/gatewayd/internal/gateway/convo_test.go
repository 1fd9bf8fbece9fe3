package gateway

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func TestDMAnsweredInThread(t *testing.T) {
	r := newRig(t, nil)
	// A turn that ends at once can cancel its first typing request in
	// flight; a turn that lasts a few typing periods always shows one.
	r.loop.delay = 200 * time.Millisecond
	p := r.post(t, r.owner, r.dm, "", "hello there")
	waitFor(t, "an answer", func() bool { return len(r.botPosts(p.ID)) == 1 })
	got := r.botPosts(p.ID)[0]
	if got.RootID != p.ID || got.Message != "echo: hello there" {
		t.Errorf("answer = %+v", got)
	}
	if strings.Contains(got.Message, "secret thinking") {
		t.Error("reasoning reached the chat")
	}
	if s := r.loop.sent(); len(s) != 1 || s[0].Session != "mm-"+p.ID {
		t.Errorf("loopd got %+v", s)
	}
	if len(r.mm.Typings()) == 0 {
		t.Error("no typing indicator")
	}
}

func TestMessagesDuringTurnBatched(t *testing.T) {
	r := newRig(t, nil)
	r.loop.delay = 300 * time.Millisecond
	p := r.post(t, r.owner, r.dm, "", "first")
	waitFor(t, "the first turn", func() bool { return len(r.loop.sent()) == 1 })
	r.post(t, r.owner, r.dm, p.ID, "second")
	r.post(t, r.owner, r.dm, p.ID, "third")
	waitFor(t, "two answers", func() bool { return len(r.botPosts(p.ID)) == 2 })
	s := r.loop.sent()
	if len(s) != 2 || s[1].Text != "second\n\nthird" || s[1].Session != s[0].Session {
		t.Errorf("loopd got %+v", s)
	}
}

// TestHostileAnswer: a 20,000-rune answer with @channel and an image
// link reaches the thread as two posts within the server's limit (the
// fake refuses longer ones), nothing lost, nothing mentioned or embedded;
// the typing indicator is refreshed while the turn runs.
func TestHostileAnswer(t *testing.T) {
	r := newRig(t, nil)
	r.loop.delay = 300 * time.Millisecond
	long := "@channel ![pwn](https://evil.example/x.png) " + strings.Repeat("é", 20000)
	r.loop.answer = func(string) string { return long }
	p := r.post(t, r.owner, r.dm, "", "write a lot")
	waitFor(t, "two posts", func() bool { return len(r.botPosts(p.ID)) == 2 })
	var all strings.Builder
	for _, b := range r.botPosts(p.ID) {
		if utf8.RuneCountInString(b.Message) > mattermost.MaxRunes {
			t.Errorf("a post of %d runes", utf8.RuneCountInString(b.Message))
		}
		all.WriteString(b.Message)
	}
	for i, b := range r.botPosts(p.ID) {
		if strings.Contains(b.Message, "@") || liveImage.MatchString(b.Message) || strings.Contains(b.Message, "://") {
			t.Errorf("post %d mentions, embeds or links: %.80q", i+1, b.Message)
		}
		if b.Props["unsafe_links"] != "true" {
			t.Errorf("post %d does not turn off link previews: props %v", i+1, b.Props)
		}
	}
	got := all.String()
	if strings.Count(got, "é") != 20000 {
		t.Error("the answer lost text")
	}
	if n := len(r.mm.Typings()); n < 3 {
		t.Errorf("typing sent %d times during a 300 ms turn refreshed every 50 ms", n)
	}
}

// liveImage is an image embed whose '!' is not escaped (an even number
// of backslashes before it escape each other).
var liveImage = regexp.MustCompile(`(^|[^\\])(\\\\)*!\[`)

func TestBatchFitsLoopd(t *testing.T) {
	big := strings.Repeat("x", 40000)
	msgs := func(ts ...string) []message {
		var out []message
		for _, t := range ts {
			out = append(out, message{text: t})
		}
		return out
	}
	m, rest := batch(msgs("a", "b", big, big, "c"))
	if m.text != "a\n\nb\n\n"+big || len(rest) != 2 {
		t.Fatalf("batch = %d bytes, %d left", len(m.text), len(rest))
	}
	m, rest = batch(rest)
	if m.text != big+"\n\nc" || len(rest) != 0 {
		t.Fatalf("second batch = %d bytes, %d left", len(m.text), len(rest))
	}
}

// TestBatchKeepsFilesWithTheirText: files go with their message's text,
// and a batch carries at most wire.MaxFiles of them.
func TestBatchKeepsFilesWithTheirText(t *testing.T) {
	files := func(n int, tag string) []wire.FileRef {
		var out []wire.FileRef
		for i := range n {
			out = append(out, wire.FileRef{ID: fmt.Sprintf("%s%025d", tag, i), Name: "f", Type: "text/plain"})
		}
		return out
	}
	m, rest := batch([]message{{text: "a", files: files(6, "a")}, {text: "b", files: files(3, "b")}, {text: "c", files: files(2, "c")}})
	if m.text != "a\n\nb" || len(m.files) != 9 || len(rest) != 1 || rest[0].text != "c" {
		t.Fatalf("batch = %q with %d files, %d left", m.text, len(m.files), len(rest))
	}
}
