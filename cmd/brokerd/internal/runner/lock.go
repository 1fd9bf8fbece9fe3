package runner

import (
	"context"
	"sync"
)

// mountLock orders calls around their mounts (review item 1). A bind
// mount is made by the runtime well after checkMounts resolved its path,
// and a running call with a writable mount could swap part of another
// call's path for a symbolic link in between. So a call with a writable
// mount holds the lock exclusively for its whole run, and every other
// call holds it shared from its mount check until its container has
// started (its mounts are made by then). A waiting exclusive holder stops
// new shared holders, so a steady stream of reads cannot starve it.
// Waiting ends with the context.
type mountLock struct {
	mu      sync.Mutex
	readers int
	writer  bool
	waiting int           // exclusive holders waiting
	changed chan struct{} // closed and replaced on every change
}

func newMountLock() *mountLock { return &mountLock{changed: make(chan struct{})} }

// acquire takes the lock, exclusive or shared, and returns its release,
// which may be called more than once.
func (l *mountLock) acquire(ctx context.Context, exclusive bool) (release func(), err error) {
	l.mu.Lock()
	if exclusive {
		l.waiting++
	}
	for {
		free := !l.writer && (exclusive && l.readers == 0 || !exclusive && l.waiting == 0)
		if free {
			if exclusive {
				l.waiting--
				l.writer = true
			} else {
				l.readers++
			}
			l.mu.Unlock()
			return sync.OnceFunc(func() { l.release(exclusive) }), nil
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			l.mu.Lock()
			if exclusive {
				l.waiting--
				l.broadcast()
			}
			l.mu.Unlock()
			return nil, ctx.Err()
		}
		l.mu.Lock()
	}
}

func (l *mountLock) release(exclusive bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if exclusive {
		l.writer = false
	} else {
		l.readers--
	}
	l.broadcast()
}

// broadcast wakes every waiter; l.mu is held.
func (l *mountLock) broadcast() {
	close(l.changed)
	l.changed = make(chan struct{})
}
