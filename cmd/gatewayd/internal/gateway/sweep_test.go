package gateway

import (
	"strings"
	"testing"
	"time"
)

// TestAnswerOfTurnRunningAtRestartPosted: a turn a previous gatewayd
// sent is still running in loopd when gatewayd starts again (the unit
// restarted alone): nothing is posted while it runs, its answer is
// posted once when it ends, without waiting for another start, and the
// session is no longer asked about.
func TestAnswerOfTurnRunningAtRestartPosted(t *testing.T) {
	r := newRig(t, nil)
	root := r.post(t, r.owner, r.dm, "", "hello")
	session := SessionPrefix + root.ID
	r.waitLog(t, "the first answer", func() bool { return len(r.botPosts(root.ID)) == 1 })
	r.stop()
	r.loop.setRunning(session, true)
	r.start(t)
	asked := r.loop.askedCount()
	r.waitLog(t, "the running session asked again", func() bool { return r.loop.askedCount() >= asked+3 })
	if n := len(r.botPosts(root.ID)); n != 1 {
		t.Fatalf("while the turn runs the thread has %d bot posts, want 1", n)
	}
	r.loop.finish(session, "the answer after the restart")
	r.loop.setRunning(session, false)
	r.waitLog(t, "the answer after the restart", func() bool { return len(r.botPosts(root.ID)) == 2 })
	late := r.botPosts(root.ID)[1]
	if !strings.Contains(late.Message, "the answer after the restart") || late.Props[PropTurn] != turnProp(session, 2, 1, 1) {
		t.Fatalf("late post = %q, props %v", late.Message, late.Props)
	}
	r.waitLog(t, "the session no longer watched", func() bool {
		r.g.mu.Lock()
		defer r.g.mu.Unlock()
		return len(r.g.watched) == 0
	})
	asked = r.loop.askedCount()
	time.Sleep(300 * time.Millisecond)
	if n := len(r.botPosts(root.ID)); n != 2 {
		t.Errorf("after the sweep the thread has %d bot posts, want 2", n)
	}
	if got := r.loop.askedCount(); got != asked {
		t.Errorf("a finished session was asked %d more times", got-asked)
	}
}

// TestLiveAnswerWaitsForEarlierTurn: the owner writes again while a turn
// a previous gatewayd sent is still unposted; the live answer of the new
// turn is posted after the earlier turn's, each once, in order (without
// the sweep's help: it runs too rarely here).
func TestLiveAnswerWaitsForEarlierTurn(t *testing.T) {
	r := newRig(t, nil)
	r.sweepEvery = time.Hour
	root := r.post(t, r.owner, r.dm, "", "hello")
	session := SessionPrefix + root.ID
	r.waitLog(t, "the first answer", func() bool { return len(r.botPosts(root.ID)) == 1 })
	r.stop()
	r.loop.setRunning(session, true)
	r.start(t)
	r.loop.finish(session, "the earlier turn's answer")
	r.loop.setRunning(session, false)
	r.post(t, r.owner, r.dm, root.ID, "and another thing")
	r.waitLog(t, "both answers", func() bool { return len(r.botPosts(root.ID)) >= 3 })
	time.Sleep(200 * time.Millisecond)
	posts := r.botPosts(root.ID)
	if len(posts) != 3 {
		t.Fatalf("the thread has %d bot posts, want 3", len(posts))
	}
	for i, want := range []struct{ text, prop string }{
		{"echo: hello", turnProp(session, 1, 1, 1)},
		{"the earlier turn's answer", turnProp(session, 2, 1, 1)},
		{"echo: and another thing", turnProp(session, 3, 1, 1)},
	} {
		if !strings.Contains(posts[i].Message, want.text) || posts[i].Props[PropTurn] != want.prop {
			t.Errorf("post %d = %q %v, want %q %s", i, posts[i].Message, posts[i].Props, want.text, want.prop)
		}
	}
}
