package gateway

import (
	"strings"
	"testing"
	"time"
)

// TestQueueBounded: past MaxQueued waiting messages, one more is refused
// with a reply in the thread, and the convo is forgotten once idle.
func TestQueueBounded(t *testing.T) {
	r := newRig(t, nil)
	r.loop.delay = 2 * time.Second
	p := r.post(t, r.owner, r.dm, "", "first")
	waitFor(t, "the first turn", func() bool { return len(r.loop.sent()) == 1 })
	for i := 0; i < MaxQueued; i++ {
		r.post(t, r.owner, r.dm, p.ID, "more")
	}
	over := r.post(t, r.owner, r.dm, p.ID, "one too many")
	waitFor(t, "the refusal", func() bool {
		for _, b := range r.botPosts(p.ID) {
			if strings.Contains(b.Message, "docs/runbook.md#gateway-busy") && b.CreateAt > over.CreateAt {
				return true
			}
		}
		return false
	})
	waitFor(t, "both turns", func() bool { return len(r.loop.sent()) == 2 })
	if s := r.loop.sent()[1]; strings.Count(s.Text, "more") != MaxQueued || strings.Contains(s.Text, "one too many") {
		t.Errorf("second turn = %q", s.Text)
	}
	waitFor(t, "the convo forgotten", func() bool {
		r.g.mu.Lock()
		defer r.g.mu.Unlock()
		return len(r.g.convos) == 0
	})
}

// TestBusyThreadsBounded: past MaxBusyThreads threads with a turn
// running, a message starting another is refused with a reply.
func TestBusyThreadsBounded(t *testing.T) {
	r := newRig(t, nil)
	r.loop.delay = time.Minute // the rig's stop ends the turns
	for i := 0; i < MaxBusyThreads; i++ {
		r.post(t, r.owner, r.dm, "", "hi")
	}
	waitFor(t, "every turn started", func() bool { return len(r.loop.sent()) == MaxBusyThreads })
	p := r.post(t, r.owner, r.dm, "", "one more thread")
	defer func() {
		if t.Failed() {
			t.Logf("posts %+v\nlog tail %s", r.botPosts(p.ID), r.logs.String()[max(0, len(r.logs.String())-3000):])
		}
	}()
	waitFor(t, "the refusal", func() bool {
		b := r.botPosts(p.ID)
		return len(b) == 1 && strings.Contains(b[0].Message, "docs/runbook.md#gateway-busy")
	})
	if n := len(r.loop.sent()); n != MaxBusyThreads {
		t.Errorf("loopd got %d turns", n)
	}
}

func TestMineBounded(t *testing.T) {
	g := &Gateway{mine: map[string]bool{}}
	for i := 0; i < maxMine+10; i++ {
		g.markMine(strings.Repeat("a", 20) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + string(rune('a'+i/17576%26)) + "xx")
	}
	if len(g.mine) != maxMine || len(g.mineFIFO) != maxMine {
		t.Errorf("mine holds %d roots, FIFO %d", len(g.mine), len(g.mineFIFO))
	}
}
