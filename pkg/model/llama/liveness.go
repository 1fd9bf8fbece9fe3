package llama

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// limits are the liveness limits of one request.
//
// Before the first byte the request is waiting, either queued behind another
// request on its slot (the server sends nothing at all until the slot frees:
// reference "observed live", and server-context.cpp:2284-2289 defers the task)
// or for the router to load the model (the router holds the request and polls:
// server-models.cpp:1369-1487). The two waits look the same on the wire, so the
// client tells them apart only when it has to: when the shorter of the two
// limits expires it asks /slots whether the pinned slot is processing. If it
// is, the wait is a busy slot and FirstByteTimeout applies; otherwise
// (slot idle, model not loaded, or /slots unanswerable) it is a model load and
// ModelLoadTimeout applies. Both are measured from the start of the request,
// and the answer of that one probe is kept for the rest of the wait. With the
// defaults (10 min busy, 3 min load) a request that has had no byte after
// 3 min fails then unless its slot is busy, in which case it may wait 10 min.
//
// From the first byte on, only idle applies: every Read that returns bytes
// restarts it, whatever the bytes are (tokens, progress events, ": " pings).
type limits struct {
	firstByte time.Duration
	modelLoad time.Duration
	idle      time.Duration
	// busy reports whether the pinned slot is processing a request. Nil
	// means the wait is not classified and firstByte applies.
	busy func(context.Context) (bool, error)
}

// watchdog enforces limits on one request by cancelling the request's
// context with a *LivenessError as the cause.
type watchdog struct {
	op     string
	lim    limits
	start  time.Time
	ctx    context.Context // the request's context; cancelled by fail and stop
	cancel context.CancelCauseFunc

	streaming atomic.Bool  // a first byte has arrived
	last      atomic.Int64 // time of the latest byte, as nanoseconds since start

	mu       sync.Mutex  // guards the fields below
	timer    *time.Timer // runs fire
	stopped  bool        // the request is over or has failed
	waitKind LimitKind   // the classification of the wait, once probed
}

func startWatchdog(parent context.Context, op string, lim limits) (*watchdog, context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{op: op, lim: lim, start: time.Now(), ctx: ctx, cancel: cancel}
	w.mu.Lock()
	w.timer = time.AfterFunc(min(lim.firstByte, lim.modelLoad), w.fire)
	w.mu.Unlock()
	return w, ctx
}

// gotByte records that bytes arrived. The timer is not reset here; fire
// checks the time of the latest byte and re-arms itself, which keeps a Read
// down to one atomic store.
func (w *watchdog) gotByte() {
	w.last.Store(int64(time.Since(w.start)))
	if w.streaming.Load() {
		return
	}
	w.mu.Lock()
	if !w.stopped && !w.streaming.Load() {
		w.streaming.Store(true)
		w.timer.Reset(w.lim.idle)
	}
	w.mu.Unlock()
}

func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	now := time.Since(w.start)
	if w.streaming.Load() {
		silence := now - time.Duration(w.last.Load())
		if silence < w.lim.idle {
			w.timer.Reset(w.lim.idle - silence)
			return
		}
		w.failLocked(LimitIdle, w.lim.idle, silence)
		return
	}
	if w.waitKind == 0 {
		// The probe is a network call: do it without the lock so that a
		// first byte arriving meanwhile is not held up.
		w.mu.Unlock()
		kind := w.classify()
		w.mu.Lock()
		if w.stopped || w.streaming.Load() {
			return // gotByte re-armed the timer for the idle limit
		}
		w.waitKind = kind
		now = time.Since(w.start)
	}
	limit := w.lim.modelLoad
	if w.waitKind == LimitFirstByte {
		limit = w.lim.firstByte
	}
	if now < limit {
		w.timer.Reset(limit - now)
		return
	}
	w.failLocked(w.waitKind, limit, now)
}

func (w *watchdog) classify() LimitKind {
	if w.lim.busy == nil {
		return LimitFirstByte
	}
	if busy, err := w.lim.busy(w.ctx); err == nil && busy {
		return LimitFirstByte
	}
	return LimitModelLoad
}

func (w *watchdog) failLocked(kind LimitKind, limit, silence time.Duration) {
	w.stopped = true
	w.cancel(&LivenessError{Op: w.op, Kind: kind, Limit: limit, Silence: silence})
}

// stop ends the watch and releases the request's context.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	w.mu.Unlock()
	w.cancel(nil)
}

// fired returns the liveness error if a limit cancelled the request.
func (w *watchdog) fired() *LivenessError {
	var le *LivenessError
	if errors.As(context.Cause(w.ctx), &le) {
		return le
	}
	return nil
}

// err returns the liveness error if a limit fired, since any other error is
// then only its consequence, and otherwise err.
func (w *watchdog) err(err error) error {
	if le := w.fired(); le != nil {
		return le
	}
	return err
}

// liveReader reports every Read that returns bytes to the watchdog.
type liveReader struct {
	r io.Reader
	w *watchdog
}

func (l liveReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.w.gotByte()
	}
	return n, err
}
