package gateway

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestReconnectLosesNoMessage kills the WebSocket at random points, over
// 100 runs, sometimes with the server's queues lost too (so the events
// are gone and only the gap fetch can find the posts): every post must
// be answered, and exactly once.
func TestReconnectLosesNoMessage(t *testing.T) {
	r := newRig(t, nil)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var roots []string
	lossy := 0
	for run := 0; run < 100; run++ {
		kill := rng.IntN(4) // before post 0, 1, 2, or after the last
		lose := rng.IntN(2) == 0
		for i := 0; i < 4; i++ {
			if i == kill {
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				r.mm.Drop(lose)
				if lose {
					lossy++
				}
			}
			if i < 3 {
				p := r.post(t, r.owner, r.dm, "", fmt.Sprintf("run %d message %d", run, i))
				roots = append(roots, p.ID)
			}
		}
		for _, root := range roots[len(roots)-3:] {
			r.waitLog(t, fmt.Sprintf("run %d (kill %d, lose %v): an answer to %s", run, kill, lose, root), func() bool { return len(r.botPosts(root)) >= 1 })
		}
	}
	time.Sleep(200 * time.Millisecond) // let any duplicate arrive
	for _, root := range roots {
		if n := len(r.botPosts(root)); n != 1 {
			t.Errorf("thread %s has %d answers, want 1", root, n)
		}
	}
	if sends := r.loop.sent(); len(sends) != len(roots) {
		t.Errorf("loopd got %d messages for %d posts", len(sends), len(roots))
	}
	if strings.Contains(r.logs.String(), r.bot.Token) {
		t.Error("the bot token is in the log")
	}
	t.Logf("100 runs, %d with the server's queues lost", lossy)
}
