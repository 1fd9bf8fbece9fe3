package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// approval is one posted approval, open while brokerd's connection is.
type approval struct {
	id         int64
	code       string // the approval's code, from brokerd; an answer must repeat it
	root       string // the thread
	channel    string
	posts      []string        // written only before answerable is set
	lastAt     int64           // create_at of the last part; commands must be later (guarded by Gateway.mu)
	answerable bool            // guarded by Gateway.mu
	answers    chan chatAnswer // buffered 1
	replaced   chan struct{}   // closed when a newer connection posts the same id
}

type chatAnswer struct {
	code    string // canonical, and the approval's
	approve bool
	reason  string
	user    string
	scope   wire.AnswerScope // approve only: this call, or a session allowance
}

// serveApproval is gateway.sock's one request per connection: one
// approval, in four phases. check: the call is for a thread of this
// gateway, in a channel it hears. claim: it becomes the pending approval
// of its id (a newer connection for the same id replaces an older one).
// post: its parts go into the thread and brokerd hears that they did.
// wait: until an approver answers in the chat (relayed to brokerd), or
// brokerd closes (withdrawn), or gatewayd stops, or a newer connection
// replaces this one.
func (g *Gateway) serveApproval(ctx context.Context, _ sockets.Peer, c *rpc.Conn, m *wire.PostApproval) error {
	call := m.Call
	a, refusal := g.checkApproval(ctx, call)
	if refusal != nil {
		return c.Send(refusal)
	}
	release := g.claim(a)
	defer release()
	bg := context.WithoutCancel(ctx)
	posted, refusal := g.postApproval(ctx, a, call)
	if refusal != nil {
		return c.Send(refusal)
	}
	if posted == nil {
		return nil // replaced while posting: already withdrawn
	}
	if err := c.Send(posted); err != nil {
		g.withdraw(bg, a, "brokerd went away")
		return err
	}
	g.await(ctx, c, a)
	return nil
}

func postRefusal(kind wire.Kind, format string, a ...any) *wire.Error {
	return &wire.Error{Op: "post_approval", Kind: kind, Msg: fmt.Sprintf(format, a...)}
}

// checkApproval is the check phase: it returns the approval to post, or
// the refusal to send.
func (g *Gateway) checkApproval(ctx context.Context, call wire.PendingCall) (*approval, *wire.Error) {
	code, cerr := wire.ParseApprovalCode(call.Code)
	if cerr != nil || code != call.Code {
		return nil, postRefusal(wire.Invalid, "approval %d has no valid code; gatewayd posts only approvals that can be answered safely", call.ID)
	}
	if job, ok := jobOf(call.Session); ok {
		return g.jobApproval(ctx, call, code, job) // jobs.go: no thread of its own
	}
	root, ok := strings.CutPrefix(call.Session, SessionPrefix)
	if !ok || !gatewayd.ValidID(root) {
		return nil, postRefusal(wire.Invalid, "session %q is not a Mattermost thread of this gateway; answer it with bxctl approve", call.Session)
	}
	rootPost, err := g.mm.GetPost(ctx, root)
	if err != nil {
		g.log.Warn("approval thread unreadable", "approval", call.ID, "err", err.Error())
		return nil, postRefusal(wire.Unavailable, "the approval's thread could not be read from Mattermost; see docs/runbook.md#gateway-mattermost")
	}
	g.mu.Lock()
	heardHere := g.channels[rootPost.ChannelID]
	g.mu.Unlock()
	if !heardHere {
		return nil, postRefusal(wire.Denied, "the approval's thread is in a channel gatewayd does not hear")
	}
	return &approval{id: call.ID, code: code, root: root, channel: rootPost.ChannelID, answers: make(chan chatAnswer, 1), replaced: make(chan struct{})}, nil
}

// claim is the claim phase: a becomes the pending approval of its id
// until release. A second post_approval for an id already posted is
// brokerd posting it again (its old connection is stale: brokerd
// restarted, or lost the connection before gatewayd saw it close). Only
// brokerd reaches gateway.sock, so the newer connection wins: the old one
// is withdrawn and closed, its posts edited to say so.
func (g *Gateway) claim(a *approval) (release func()) {
	g.mu.Lock()
	if old, dup := g.pending[a.id]; dup {
		close(old.replaced)
		g.log.Info("approval posted again: the older post is withdrawn", "approval", a.id)
	}
	g.pending[a.id] = a
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		if g.pending[a.id] == a {
			delete(g.pending, a.id)
		}
		g.mu.Unlock()
	}
}

// postApproval is the post phase: every part into the thread, each
// recorded at once. It returns brokerd's confirmation, or the refusal to
// send, or neither when a newer connection replaced this one meanwhile.
func (g *Gateway) postApproval(ctx context.Context, a *approval, call wire.PendingCall) (*wire.ApprovalPosted, *wire.Error) {
	posts := render.Approval(call, g.cfg.MaxApprovalParts)
	var lastAt int64
	for _, part := range posts.Parts {
		p, err := g.mm.CreatePost(ctx, a.channel, a.root, part)
		if err != nil {
			g.log.Error("posting an approval failed", "approval", call.ID, "err", err.Error())
			g.withdraw(context.WithoutCancel(ctx), a, "it could not be posted whole")
			return nil, postRefusal(wire.Unavailable, "the approval could not be posted; see docs/runbook.md#gateway-mattermost")
		}
		a.posts = append(a.posts, p.ID)
		lastAt = p.CreateAt
		// Recorded at once: if gatewayd dies before the last part, the
		// next run still marks this part dead.
		if err := g.dead.add(call.ID, p.ID); err != nil {
			g.log.Error("recording an approval post failed", "approval", call.ID, "err", err.Error())
		}
	}
	g.mu.Lock()
	current := g.pending[call.ID] == a
	if current {
		a.answerable, a.lastAt = posts.Answerable, lastAt
	}
	g.mu.Unlock()
	if !current {
		g.withdraw(context.WithoutCancel(ctx), a, "posted again below")
		return nil, nil
	}
	return &wire.ApprovalPosted{ID: call.ID, Parts: len(posts.Parts), Answerable: posts.Answerable}, nil
}

// await is the wait phase. brokerd may send nothing more until it is
// asked: a frame from it breaks the protocol, and its closing the
// connection withdraws the approval.
func (g *Gateway) await(ctx context.Context, c *rpc.Conn, a *approval) {
	frames := make(chan strict.Variant)
	go func() {
		defer close(frames)
		for {
			v, err := c.Recv()
			if err != nil {
				return
			}
			select {
			case frames <- v:
			case <-ctx.Done():
				return
			}
		}
	}()
	bg := context.WithoutCancel(ctx)
	select {
	case v, ok := <-frames:
		switch {
		case ok:
			g.log.Warn("brokerd sent an unexpected message on gateway.sock", "message", v.Tag())
			g.withdraw(bg, a, "brokerd broke the protocol")
		case ctx.Err() != nil:
			g.withdraw(bg, a, "gatewayd stopped; if the call still waits, brokerd posts it again")
		default:
			g.withdraw(bg, a, "answered elsewhere, expired or withdrawn")
			// Never silence: the thread hears that nothing here can
			// answer it any more, and what to do.
			g.reply(bg, a.channel, a.root, fmt.Sprintf("Approval %d is no longer pending: it was answered on the host (bxctl), it expired unanswered, its turn was withdrawn, or brokerd restarted (which loses a pending approval: the turn was told the call failed). Unless you answered it with bxctl, the call did not run; if it is still wanted, ask again.", a.id))
		}
	case <-ctx.Done():
		g.withdraw(bg, a, "gatewayd stopped; if the call still waits, brokerd posts it again")
	case <-a.replaced:
		g.withdraw(bg, a, "posted again below")
	case ans := <-a.answers:
		g.relay(bg, c, a, ans, frames)
	}
}

// relay sends an approver's answer to brokerd and shows the outcome.
func (g *Gateway) relay(ctx context.Context, c *rpc.Conn, a *approval, ans chatAnswer, frames <-chan strict.Variant) {
	if c.Send(&wire.OwnerAnswer{ID: a.id, Code: ans.code, Approve: ans.approve, Reason: ans.reason, Approver: "mattermost:" + ans.user, Scope: ans.scope}) != nil {
		g.withdraw(ctx, a, "brokerd went away")
		return
	}
	var reply strict.Variant
	select {
	case reply = <-frames:
	case <-time.After(time.Minute):
	}
	verdict := "refused"
	if ans.approve {
		verdict = "approved"
	}
	switch r := reply.(type) {
	case *wire.Answered:
		g.log.Info("approval answered in the chat", "approval", a.id, "answer", verdict, "user", ans.user, "scope", string(ans.scope))
		g.finish(ctx, a, verdict+" by an approver in this thread: "+render.Plain(r.Msg))
		if ans.scope != wire.ScopeCall {
			// Say in the thread what the yes reaches (or that no
			// allowance was made), not only in an edited post.
			g.reply(ctx, a.channel, a.root, fmt.Sprintf("Approval %d: %s", a.id, render.Plain(r.Msg)))
		}
		if r.Outcome == wire.OutcomeAllowance {
			g.hold(ctx, c, a, frames)
		}
	case *wire.Error:
		g.log.Info("approval answer not taken", "approval", a.id, "user", ans.user, "err", r.Error())
		g.finish(ctx, a, "the answer was not taken: "+render.Plain(r.Msg))
	default:
		g.withdraw(ctx, a, "brokerd did not confirm the answer")
	}
}

// withdraw edits an approval's posts to say it can no longer be answered.
func (g *Gateway) withdraw(ctx context.Context, a *approval, why string) {
	g.finish(ctx, a, "withdrawn: "+why+".")
}

// finish edits an approval's posts to show its outcome, and records the
// ones edited so the next run leaves them as they are (a post whose edit
// failed is still marked dead then).
func (g *Gateway) finish(ctx context.Context, a *approval, outcome string) {
	var done []string
	for i, id := range a.posts {
		msg := fmt.Sprintf("~~Approval %d~~ (part %d of %d): %s", a.id, i+1, len(a.posts), outcome)
		if err := g.mm.PatchMessage(ctx, id, msg); err != nil {
			g.log.Warn("editing an approval post failed", "post", id, "err", err.Error())
			continue
		}
		done = append(done, id)
	}
	if err := g.dead.finished(a.id, done); err != nil {
		g.log.Error("recording an approval's outcome failed", "approval", a.id, "err", err.Error())
	}
}
