package gateway

import (
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
)

// TestFirstStartAnswersWhatArrivesWhileConnecting: on a first start (no
// cursor), a post made after gatewayd started but before its WebSocket
// connected is answered (it was lost before: the soak's first
// Mattermost turn went unanswered), and the channel's history from
// before the start is answered neither then nor by a later gap fetch
// (which, with nothing handled yet, once asked for every post since 0).
func TestFirstStartAnswersWhatArrivesWhileConnecting(t *testing.T) {
	var history, early string
	r := newRig(t, func(r *rig, _ *gatewayd.Config) {
		history = r.post(t, r.owner, r.dm, "", "an old message, before gatewayd ever ran").ID
		// Past the gap fetch's margin for clock steps (5 s).
		time.Sleep(5200 * time.Millisecond)
		r.beforeServe = func() {
			early = r.post(t, r.owner, r.dm, "", "sent while gatewayd connects").ID
		}
	})
	r.waitLog(t, "the answer to the post made while connecting", func() bool { return len(r.botPosts(early)) == 1 })
	// A lossy drop: only the gap fetch can find what follows.
	r.mm.Drop(true)
	later := r.post(t, r.owner, r.dm, "", "after a drop")
	r.waitLog(t, "the answer to the post after the drop", func() bool { return len(r.botPosts(later.ID)) == 1 })
	time.Sleep(200 * time.Millisecond) // let a wrong answer arrive
	if n := len(r.botPosts(history)); n != 0 {
		t.Errorf("the history before the first start was answered (%d posts)", n)
	}
	if n := len(r.botPosts(early)); n != 1 {
		t.Errorf("the post made while connecting was answered %d times", n)
	}
}
