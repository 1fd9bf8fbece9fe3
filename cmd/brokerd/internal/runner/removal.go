package runner

import (
	"context"
	"sync"
	"time"
)

// SettleWait bounds brokerd's wait at shutdown for the removals its last
// calls left running (Podman.Settle): each is bounded by removeWait.
const SettleWait = removeWait + 5*time.Second

// removals counts the containers whose removal runs after their call
// answered (removeLater); Settle waits for the count to reach zero.
type removals struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to zero
}

func (r *removals) add() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		r.idle = make(chan struct{})
	}
	r.n++
}

func (r *removals) done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n--; r.n == 0 {
		close(r.idle)
	}
}

// removeLater removes a container whose exit the call observed, after
// the call has answered: the removal (about a fifth of a read_file
// call's time) is then no longer between the tool's exit and its result.
// Nothing it removes can run any more, so nothing the call was granted
// outlives the answer but an exited container's record. release (the
// call's mount lock; a no-op if it is already released) is called only
// once the container is gone, so a writable mount stays exclusive until
// then. The removal has its own deadline (remove), not the call's.
// Settle waits for it; a crash before it ends leaves the container to
// the next start's Sweep.
func (p *Podman) removeLater(conn context.Context, id string, release func()) {
	p.removing.add()
	go func() {
		defer p.removing.done()
		defer release()
		if p.beforeRemove != nil {
			p.beforeRemove(id)
		}
		t0 := time.Now()
		p.remove(conn, id)
		p.mark("remove after answer", &t0)
	}()
}

// Settle waits until every removal a call left running after its answer
// has ended (and released its mount lock), or ctx ends. brokerd calls it
// as it stops, so a normal stop leaves no container; removals started
// while it waits are waited for too.
func (p *Podman) Settle(ctx context.Context) error {
	for {
		p.removing.mu.Lock()
		if p.removing.n == 0 {
			p.removing.mu.Unlock()
			return nil
		}
		idle := p.removing.idle
		p.removing.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Settler is a Runner that may still be removing containers after Run
// has returned.
type Settler interface {
	Settle(ctx context.Context) error
}
