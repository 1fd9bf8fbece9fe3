package memory

import (
	"context"
	"log/slog"
	"sync"
)

// MaxPending is how many ended turns the [Notifier] holds for memoryd
// while it is slow. Past it a turn is not handed over now: memoryd finds
// it in the log at its next start (catch-up), so nothing is lost, only
// indexed later.
const MaxPending = 1024

type ended struct {
	session     string
	epoch, turn int64
}

// Notifier hands ended turns to memoryd off the turn's path, one at a
// time and in the order they ended. A turn's answer (and the session's
// next turn) never waits on memory.sock: memoryd may be held up by
// brokerd's gate or Honcho's outbox for up to the socket's wait.
type Notifier struct {
	c    *Client
	log  *slog.Logger
	wake chan struct{}

	mu      sync.Mutex
	pending []ended
}

// NewNotifier starts a notifier that runs until ctx ends; turns still
// pending then are left to memoryd's catch-up from the log.
func NewNotifier(ctx context.Context, c *Client, log *slog.Logger) *Notifier {
	n := &Notifier{c: c, log: log, wake: make(chan struct{}, 1)}
	go n.run(ctx)
	return n
}

// Ended queues turn of session's epoch for memoryd and returns at once.
func (n *Notifier) Ended(session string, epoch, turn int64) {
	n.mu.Lock()
	full := len(n.pending) >= MaxPending
	if !full {
		n.pending = append(n.pending, ended{session, epoch, turn})
	}
	n.mu.Unlock()
	if full {
		n.log.Warn("turn not handed to memoryd now: too many wait for it; memoryd indexes it from the log at its next start; see docs/runbook.md#memoryd-unavailable",
			"session", session, "turn", turn, "pending", MaxPending)
		return
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Notifier) run(ctx context.Context) {
	for {
		n.mu.Lock()
		var next *ended
		if len(n.pending) > 0 {
			e := n.pending[0]
			next = &e
			n.pending = n.pending[1:]
		}
		n.mu.Unlock()
		if next == nil {
			select {
			case <-n.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		// Indexing is memoryd's; a failure never fails the turn (the
		// index catches up from the log when memoryd restarts).
		if err := n.c.TurnDone(ctx, next.session, next.epoch, next.turn); err != nil && ctx.Err() == nil {
			n.log.Warn("turn not indexed", "session", next.session, "turn", next.turn, "err", err.Error())
		}
		if ctx.Err() != nil {
			return
		}
	}
}
