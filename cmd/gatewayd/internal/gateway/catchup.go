package gateway

import (
	"context"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// maxCatchUpRounds bounds the answers_since requests for one session at
// start: wire.MaxAnswers outcomes each.
const maxCatchUpRounds = 16

// deliverMissed posts, for each session in the delivery record, the
// outcomes of the turns that ended after its mark (loopd's
// answers_since), skipping a part the thread already holds (a crash
// between posting and marking), and advances the mark. A session whose
// turn is still running in loopd (one a previous gatewayd sent), or that
// loopd or Mattermost failed to answer for, is watched: [Gateway.sweep]
// asks again until it has nothing more to post.
func (g *Gateway) deliverMissed(ctx context.Context) {
	for _, e := range g.delivery.list() {
		if ctx.Err() != nil {
			return
		}
		if g.deliverSession(ctx, e.Session) {
			g.watch(e.Session, true)
		}
	}
}

// DefaultSweepEvery is how often the watched sessions are asked again.
const DefaultSweepEvery = 5 * time.Second

// sweep asks loopd again, every g.sweepEvery until ctx ends, for the
// outcomes of the watched sessions, and stops watching one once it has
// no turn running and nothing left to post. This is what posts the
// answer of a turn that was running when gatewayd restarted: no live
// conversation of this process waits for it.
func (g *Gateway) sweep(ctx context.Context) {
	t := time.NewTicker(g.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		sessions := make([]string, 0, len(g.watched))
		for s := range g.watched {
			sessions = append(sessions, s)
		}
		g.mu.Unlock()
		for _, s := range sessions {
			if ctx.Err() != nil {
				return
			}
			if !g.deliverSession(ctx, s) {
				g.watch(s, false)
			}
		}
	}
}

// watch starts or stops watching session.
func (g *Gateway) watch(session string, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if on {
		g.watched[session] = true
	} else {
		delete(g.watched, session)
	}
}

// postLock is session's lock for posting outcomes: the live path, the
// start's catch-up and the sweep each hold it from reading the mark to
// writing it, so no outcome is posted twice or out of order. Sessions
// share a fixed set of locks, so the set never grows.
func (g *Gateway) postLock(session string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(session))
	return &g.postLocks[h.Sum32()%uint32(len(g.postLocks))]
}

// deliverSession posts session's outcomes after its mark, under its
// post lock. It reports whether the session must be asked again: a turn
// is still running, or loopd or Mattermost failed (the mark stays).
func (g *Gateway) deliverSession(ctx context.Context, session string) (again bool) {
	l := g.postLock(session)
	l.Lock()
	defer l.Unlock()
	return g.deliverLocked(ctx, session)
}

// deliverLocked is deliverSession; the caller holds the post lock.
func (g *Gateway) deliverLocked(ctx context.Context, session string) (again bool) {
	e, ok := g.delivery.get(session)
	if !ok {
		return false
	}
	var posted map[string]bool
	after := e.Turn
	for range maxCatchUpRounds {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		a, err := rpc.Ask[*wire.Answers](actx, &wire.Loop, g.cfg.LoopSocket, &wire.AnswersSince{Session: e.Session, AfterTurn: after})
		cancel()
		if err != nil {
			g.log.Warn("asking loopd for the answers missed failed; asked again shortly; see docs/runbook.md#loopd-not-running", "session", e.Session, "err", err.Error())
			return true
		}
		if a.Session != e.Session {
			g.log.Warn("loopd answered for another session; see docs/runbook.md#loopd-not-running", "session", e.Session)
			return true
		}
		for _, it := range a.Items {
			if it.Turn <= after {
				g.log.Warn("loopd answered an older turn; see docs/runbook.md#loopd-not-running", "session", e.Session, "turn", it.Turn)
				return true
			}
			if posted == nil {
				if posted, err = g.ownMarks(ctx, e.Root); err != nil {
					g.log.Warn("reading the thread failed; the answers missed are posted shortly; see docs/runbook.md#gateway-mattermost", "thread", e.Root, "err", err.Error())
					return true
				}
			}
			out := render.Answer(it.Text)
			if it.Reason != "" {
				out = stoppedPosts(it.Reason, it.Text)
			}
			g.log.Info("posting an answer no live conversation waited for", "session", e.Session, "turn", it.Turn)
			if !g.postOutcome(ctx, e.Channel, e.Root, e.Session, it.Turn, out, posted) {
				return true
			}
			after = it.Turn
		}
		if !a.More || len(a.Items) == 0 {
			return a.Running
		}
	}
	return true
}

// ownMarks returns the [PropTurn] marks of the bot's posts in thread root.
func (g *Gateway) ownMarks(ctx context.Context, root string) (map[string]bool, error) {
	posts, err := g.mm.Thread(ctx, root)
	if err != nil {
		return nil, err
	}
	marks := map[string]bool{}
	for _, p := range posts {
		if v, ok := p.Props[PropTurn].(string); ok && p.UserID == g.me.ID && strings.HasPrefix(v, SessionPrefix+root+":") {
			marks[v] = true
		}
	}
	return marks, nil
}
