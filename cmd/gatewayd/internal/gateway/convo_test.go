package gateway

import (
	"strings"
	"testing"
	"time"
)

func TestDMAnsweredInThread(t *testing.T) {
	r := newRig(t, nil)
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
