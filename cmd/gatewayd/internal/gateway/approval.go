package gateway

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/frame"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// approval is one posted approval, open while brokerd's connection is.
type approval struct {
	id         int64
	root       string // the thread
	channel    string
	posts      []string        // written only before answerable is set
	lastAt     int64           // create_at of the last part; commands must be later (guarded by Gateway.mu)
	answerable bool            // guarded by Gateway.mu
	answers    chan chatAnswer // buffered 1
	replaced   chan struct{}   // closed when a newer connection posts the same id
}

type chatAnswer struct {
	approve bool
	reason  string
	user    string
}

// serveApproval handles one gateway.sock connection: one approval.
func (g *Gateway) serveApproval(ctx context.Context, peer sockets.Peer, c net.Conn) {
	fail := func(kind wire.Kind, format string, a ...any) {
		g.send(c, &wire.Error{Op: "post_approval", Kind: kind, Msg: fmt.Sprintf(format, a...)})
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	body, err := frame.Read(c, wire.GatewayFrameMax)
	if err != nil {
		return
	}
	v, err := wire.GatewayMessages.Decode(body)
	if err != nil {
		fail(wire.Invalid, "the message did not decode: %v", err)
		return
	}
	m, ok := v.(*wire.PostApproval)
	if !ok {
		g.log.Warn("message refused: not accepted on this socket; see docs/runbook.md#socket-forbidden", "socket", Socket, "message", v.Tag(), "uid", peer.UID())
		fail(wire.Forbidden, "%s is not accepted on %s", v.Tag(), Socket)
		return
	}
	call := m.Call
	root, ok := strings.CutPrefix(call.Session, SessionPrefix)
	if !ok || !mattermost.ValidID(root) {
		fail(wire.Invalid, "session %q is not a Mattermost thread of this gateway; answer it with bxctl approve", call.Session)
		return
	}
	rootPost, err := g.mm.GetPost(ctx, root)
	if err != nil {
		fail(wire.Unavailable, "the approval's thread could not be read from Mattermost; see docs/runbook.md#gateway-mattermost")
		g.log.Warn("approval thread unreadable", "approval", call.ID, "err", err.Error())
		return
	}
	g.mu.Lock()
	heardHere := g.channels[rootPost.ChannelID]
	g.mu.Unlock()
	if !heardHere {
		fail(wire.Denied, "the approval's thread is in a channel gatewayd does not hear")
		return
	}
	a := &approval{id: call.ID, root: root, channel: rootPost.ChannelID, answers: make(chan chatAnswer, 1), replaced: make(chan struct{})}
	// A second post_approval for an id already posted is brokerd
	// posting it again (its old connection is stale: brokerd restarted,
	// or lost the connection before gatewayd saw it close). Only brokerd
	// reaches gateway.sock, so the newer connection wins: the old one is
	// withdrawn and closed, its posts edited to say so.
	g.mu.Lock()
	if old, dup := g.pending[call.ID]; dup {
		close(old.replaced)
		g.log.Info("approval posted again: the older post is withdrawn", "approval", call.ID)
	}
	g.pending[call.ID] = a
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if g.pending[call.ID] == a {
			delete(g.pending, call.ID)
		}
		g.mu.Unlock()
	}()

	posts := render.Approval(call, g.cfg.MaxApprovalParts)
	var lastAt int64
	for _, part := range posts.Parts {
		p, err := g.mm.CreatePost(ctx, a.channel, root, part)
		if err != nil {
			g.log.Error("posting an approval failed", "approval", call.ID, "err", err.Error())
			g.withdraw(context.WithoutCancel(ctx), a, "it could not be posted whole")
			fail(wire.Unavailable, "the approval could not be posted; see docs/runbook.md#gateway-mattermost")
			return
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
		return
	}
	if !g.send(c, &wire.ApprovalPosted{ID: call.ID, Parts: len(posts.Parts), Answerable: posts.Answerable}) {
		g.withdraw(context.WithoutCancel(ctx), a, "brokerd went away")
		return
	}
	// brokerd closing the connection withdraws the approval.
	frames := make(chan strict.Variant)
	go func() {
		defer close(frames)
		c.SetReadDeadline(time.Time{})
		for {
			body, err := frame.Read(c, wire.GatewayFrameMax)
			if err != nil {
				return
			}
			v, err := wire.GatewayMessages.Decode(body)
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
func (g *Gateway) relay(ctx context.Context, c net.Conn, a *approval, ans chatAnswer, frames <-chan strict.Variant) {
	if !g.send(c, &wire.OwnerAnswer{ID: a.id, Approve: ans.approve, Reason: ans.reason, Approver: "mattermost:" + ans.user}) {
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
		g.log.Info("approval answered in the chat", "approval", a.id, "answer", verdict, "user", ans.user)
		g.finish(ctx, a, verdict+" by an approver in this thread: "+render.Plain(r.Msg))
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

func (g *Gateway) send(c net.Conn, v strict.Variant) bool {
	b, err := wire.GatewayMessages.Encode(v)
	if err == nil {
		err = frame.Write(c, b, wire.GatewayFrameMax)
	}
	return err == nil
}
