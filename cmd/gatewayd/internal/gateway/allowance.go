package gateway

import (
	"context"
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// held is a session allowance made from an answer in its thread: its
// approval's gateway.sock connection stays open while it lives, so that
// `!revoke ID` in the same thread reaches brokerd.
type held struct {
	id      int64
	root    string
	channel string
	revoke  chan string // buffered 1: the approver's user id
}

// hold keeps approval a's connection while brokerd holds it (the
// allowance lives), relaying one `!revoke`. brokerd closing it means the
// allowance ended, or brokerd stopped: the thread is told either way.
func (g *Gateway) hold(ctx context.Context, c *rpc.Conn, a *approval, frames <-chan strict.Variant) {
	h := &held{id: a.id, root: a.root, channel: a.channel, revoke: make(chan string, 1)}
	g.mu.Lock()
	g.held[a.id] = h
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if g.held[a.id] == h {
			delete(g.held, a.id)
		}
		g.mu.Unlock()
	}()
	select {
	case <-g.life.Done():
	case <-frames:
		g.reply(ctx, h.channel, h.root, fmt.Sprintf("Session allowance %d can no longer be revoked from this thread: it ended (its epoch ended, a grant changed, the thread became more tainted, or it was revoked on the host), or brokerd restarted. `bxctl allowances` on the host lists the live ones; calls it no longer covers ask again.", h.id))
	case user := <-h.revoke:
		if c.Send(&wire.AllowanceRevoke{ID: h.id, Approver: "mattermost:" + user}) != nil {
			g.reply(ctx, h.channel, h.root, fmt.Sprintf("Session allowance %d could not be revoked from here: brokerd went away. Revoke it on the host: `bxctl allowances revoke %d`.", h.id, h.id))
			return
		}
		var reply strict.Variant
		select {
		case reply = <-frames:
		case <-time.After(time.Minute):
		}
		switch r := reply.(type) {
		case *wire.Answered:
			g.reply(ctx, h.channel, h.root, render.Plain(r.Msg)+".")
		case *wire.Error:
			g.reply(ctx, h.channel, h.root, "The revocation was not taken: "+render.Plain(r.Msg))
		default:
			g.reply(ctx, h.channel, h.root, fmt.Sprintf("brokerd did not confirm the revocation of session allowance %d; check with `bxctl allowances` on the host, and revoke it there.", h.id))
		}
	}
}

// revokeCommand handles an approver's `!revoke ID`.
func (g *Gateway) revokeCommand(ctx context.Context, post *mattermost.Post, id int64) {
	g.mu.Lock()
	h := g.held[id]
	g.mu.Unlock()
	if h == nil || h.root != post.Thread() {
		g.reply(ctx, post.ChannelID, post.Thread(), fmt.Sprintf("No session allowance %d can be revoked from this thread: it ended, it was made elsewhere, or gatewayd or brokerd restarted since. Revoke it on the host: `bxctl allowances revoke %d`; see docs/runbook.md#allowance-not-live", id, id))
		return
	}
	select {
	case h.revoke <- post.UserID:
	default:
		g.log.Info("revoke ignored: one is already on its way", "allowance", id, "post", post.ID)
	}
}
