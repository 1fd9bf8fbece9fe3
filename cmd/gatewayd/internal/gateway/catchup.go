package gateway

import (
	"context"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/rpc"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// maxCatchUpRounds bounds the answers_since requests for one session at
// start: wire.MaxAnswers outcomes each.
const maxCatchUpRounds = 16

// deliverMissed posts, for each session in the delivery record, the
// outcomes of the turns that ended after its mark (loopd's
// answers_since), skipping a part the thread already holds (a crash
// between posting and marking), and advances the mark. loopd or
// Mattermost failing leaves the mark, to be tried at the next start.
func (g *Gateway) deliverMissed(ctx context.Context) {
	for _, e := range g.delivery.list() {
		if ctx.Err() != nil {
			return
		}
		g.deliverSession(ctx, e)
	}
}

func (g *Gateway) deliverSession(ctx context.Context, e delivered) {
	var posted map[string]bool
	after := e.Turn
	for range maxCatchUpRounds {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		a, err := rpc.Ask[*wire.Answers](actx, &wire.Loop, g.cfg.LoopSocket, &wire.AnswersSince{Session: e.Session, AfterTurn: after})
		cancel()
		if err != nil {
			g.log.Warn("asking loopd for the answers missed failed; they are posted at the next start; see docs/runbook.md#loopd-not-running", "session", e.Session, "err", err.Error())
			return
		}
		if a.Session != e.Session {
			g.log.Warn("loopd answered for another session; see docs/runbook.md#loopd-not-running", "session", e.Session)
			return
		}
		for _, it := range a.Items {
			if it.Turn <= after {
				g.log.Warn("loopd answered an older turn; see docs/runbook.md#loopd-not-running", "session", e.Session, "turn", it.Turn)
				return
			}
			if posted == nil {
				if posted, err = g.ownMarks(ctx, e.Root); err != nil {
					g.log.Warn("reading the thread failed; the answers missed are posted at the next start; see docs/runbook.md#gateway-mattermost", "thread", e.Root, "err", err.Error())
					return
				}
			}
			out := render.Answer(it.Text)
			if it.Reason != "" {
				out = stoppedPosts(it.Reason, it.Text)
			}
			g.log.Info("posting an answer that ended while gatewayd was down", "session", e.Session, "turn", it.Turn)
			if !g.postOutcome(ctx, e.Channel, e.Root, e.Session, it.Turn, out, posted) {
				return
			}
			after = it.Turn
		}
		if !a.More || len(a.Items) == 0 {
			return
		}
	}
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
