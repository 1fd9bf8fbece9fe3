package gateway

import (
	"strings"
	"testing"
	"time"
)

// TestStatusCommand: !status posts loopd's view of the thread's session
// and its peers, the model's name rendered plain, and never reaches the
// model; with a loopd that accepts and never answers, it says so within
// its bound.
func TestStatusCommand(t *testing.T) {
	r := newRig(t, nil)
	p := r.post(t, r.owner, r.dm, "", "hello")
	waitFor(t, "the answer", func() bool { return len(r.botPosts(p.ID)) == 1 })
	r.post(t, r.owner, r.dm, p.ID, "!status")
	waitFor(t, "the status", func() bool { return len(r.botPosts(p.ID)) == 2 })
	got := r.botPosts(p.ID)[1].Message
	for _, want := range []string{"- roles: gatewayd up, loopd up, inferproxy up, brokerd down",
		"this thread's context 8192 of 32768 tokens (25%)", "epoch 1, 1 compaction(s), last turn 7, idle",
		"re-read 1 tokens beyond the new suffix and reused 8000; today's prefill 12.3 s", "- job digest: next 2026-12-02T07:00:00Z"} {
		if !strings.Contains(got, want) {
			t.Errorf("!status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "![x](https://") {
		t.Errorf("the model's name was not rendered plain:\n%s", got)
	}
	if len(r.loop.sent()) != 1 {
		t.Error("!status reached the model")
	}
	old := statusWait
	statusWait = 300 * time.Millisecond
	t.Cleanup(func() { statusWait = old })
	r.loop.mu.Lock()
	r.loop.statusHang = true
	r.loop.mu.Unlock()
	start := time.Now()
	r.post(t, r.owner, r.dm, p.ID, "!status")
	waitFor(t, "the bounded reply", func() bool { return len(r.botPosts(p.ID)) == 3 })
	if m := r.botPosts(p.ID)[2].Message; !strings.Contains(m, "loopd did not answer within 300ms") || time.Since(start) > 5*time.Second {
		t.Errorf("a stuck loopd: %q after %v", m, time.Since(start))
	}
}
