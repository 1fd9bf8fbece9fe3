package gateway

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReconnectLosesNoMessage: over 100 runs, a separate goroutine drops
// the WebSocket at random moments while the owner's posts are being
// created and their events written (and while the answers are posted),
// sometimes with the frames in flight lost (so the reconnect replays the
// server's dead queue), sometimes with the server's queues lost too (so
// only the gap fetch can find the posts). Every post must
// be answered, exactly once, and across the runs both the dead-queue
// replay and the gap fetch must have happened.
func TestReconnectLosesNoMessage(t *testing.T) {
	r := newRig(t, nil)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(1, seed))
	var roots []string
	drops, lossy := 0, 0
	for run := 0; run < 100; run++ {
		// The dropper gets its own generator: rand.Rand is not safe
		// for concurrent use.
		drng := rand.New(rand.NewPCG(uint64(run), rng.Uint64()))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var what []string
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 6; n++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(drng.IntN(2000)) * time.Microsecond):
				}
				// A drop either loses the frames in flight (a stall
				// first: the reconnect replays them from the dead
				// queue), or the server's queues too (only the gap
				// fetch finds the posts), or neither.
				how := drng.IntN(4) % 3 // stall+drop half the time
				if how == 0 {
					r.mm.Stall()
					time.Sleep(time.Duration(1000+drng.IntN(3000)) * time.Microsecond)
				}
				lose := how == 1
				r.mm.Drop(lose)
				mu.Lock()
				what = append(what, [...]string{"stall+drop", "drop(lose)", "drop"}[how])
				drops++
				if lose {
					lossy++
				}
				mu.Unlock()
			}
		}()
		for i := 0; i < 3; i++ {
			p := r.post(t, r.owner, r.dm, "", fmt.Sprintf("run %d message %d", run, i))
			roots = append(roots, p.ID)
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		}
		// The dropper keeps going while the answers are posted: their
		// posted and typing events are in flight too.
		for _, root := range roots[len(roots)-3:] {
			r.waitLog(t, fmt.Sprintf("run %d (seed %d): an answer to %s", run, seed, root),
				func() bool { return len(r.botPosts(root)) >= 1 })
		}
		close(stop)
		wg.Wait()
		mu.Lock()
		t.Logf("run %d: %v", run, what)
		mu.Unlock()
	}
	time.Sleep(200 * time.Millisecond) // let any duplicate arrive
	for _, root := range roots {
		if n := len(r.botPosts(root)); n != 1 {
			t.Errorf("thread %s has %d answers, want 1 (seed %d)", root, n, seed)
		}
	}
	if sends := r.loop.sent(); len(sends) != len(roots) {
		t.Errorf("loopd got %d messages for %d posts (seed %d)", len(sends), len(roots), seed)
	}
	if strings.Contains(r.logs.String(), r.bot.Token) {
		t.Error("the bot token is in the log")
	}
	replays, gaps := r.mm.Replays(), r.gaps.Load()
	outOfSeq := strings.Count(r.logs.String(), "event out of sequence")
	t.Logf("100 runs, %d drops (%d with the server's queues lost): %d dead-queue replays, %d gap fetches, %d out-of-sequence reconnects (seed %d)",
		drops, lossy, replays, gaps, outOfSeq, seed)
	if replays == 0 {
		t.Errorf("no reconnect replayed the dead queue: the drops never caught an event in flight (seed %d)", seed)
	}
	if gaps == 0 {
		t.Errorf("no gap was fetched: no drop lost the server's queues (seed %d)", seed)
	}
}
