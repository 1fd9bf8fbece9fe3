package broker

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/pending"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// The courier carries pending approvals to gatewayd, so the owner can
// answer them in the chat: one gateway.sock connection per pending
// approval, open while it is pending. brokerd dials out; gatewayd never
// reaches admin.sock, and can answer only an approval it was sent, by
// id, once. Closing the connection (the approval was answered elsewhere,
// expired or withdrawn) withdraws the post. When gatewayd goes away (a
// restart), the courier posts the approval again.

// courierPoll is how often the courier looks for new pending approvals.
var courierPoll = 100 * time.Millisecond

// afterAnswer, when set (by tests), runs between taking an answer and
// sending its outcome: the window in which the courier loop once closed
// the connection (TestCourierConfirmsAfterSlowAnswer).
var afterAnswer func()

// approverPattern is what gatewayd may name as the approver.
var approverPattern = regexp.MustCompile(`^mattermost:[a-z0-9]{26}$`)

func (b *Broker) courier(ctx context.Context) {
	running := map[int64]context.CancelFunc{}
	defer func() {
		for _, cancel := range running {
			cancel()
		}
	}()
	t := time.NewTicker(courierPoll)
	defer t.Stop()
	for {
		now := map[int64]bool{}
		for _, e := range b.pending.List() {
			now[e.ID] = true
			if _, ok := running[e.ID]; !ok {
				cctx, cancel := context.WithCancel(ctx)
				running[e.ID] = cancel
				go b.carry(cctx, e)
			}
		}
		for id, cancel := range running {
			if _, held := b.holding.Load(id); !now[id] && !held {
				cancel() // answered, expired or withdrawn: close its connection
				delete(running, id)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// carry keeps approval e posted until ctx ends (it stops pending).
func (b *Broker) carry(ctx context.Context, e pending.Entry) {
	wait := 200 * time.Millisecond
	for ctx.Err() == nil {
		again, err := b.carryOnce(ctx, e)
		if !again {
			switch {
			case errors.Is(err, wire.Invalid):
				// Not a chat session (a bxctl chat one): expected.
				b.log.Info("approval not for the chat; answer it with bxctl", "approval", e.ID, "err", err.Error())
			case err != nil:
				b.log.Warn("approval not posted to the chat; answer it with bxctl", "approval", e.ID, "err", err.Error())
			}
			<-ctx.Done()
			return
		}
		if err != nil && ctx.Err() == nil {
			b.log.Debug("courier connection ended", "socket", wire.Gateway.Name, "approval", e.ID, "err", err.Error())
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// carryOnce runs one connection. It reports whether to try again.
func (b *Broker) carryOnce(ctx context.Context, e pending.Entry) (bool, error) {
	c, err := rpc.Dial(ctx, &wire.Gateway, b.cfg.GatewaySocket)
	if err != nil {
		return true, err
	}
	defer c.Close()
	// Whoever listens on gateway.sock sees the approval and may answer
	// it: it must be gatewayd's user, not whoever bound the path first.
	peer, err := c.Peer()
	if err != nil || !slices.Contains(b.cfg.GatewayUIDs(), peer.UID()) {
		uid := int64(-1)
		if err == nil {
			uid = int64(peer.UID())
		}
		b.log.Warn("gateway.sock refused: its listener is not an allowed user; the approval is not sent; see docs/runbook.md#courier-gateway-peer",
			"approval", e.ID, "socket", b.cfg.GatewaySocket, "uid", uid, "allowed", b.cfg.GatewayUIDs())
		return true, errors.New("gateway.sock's listener is not an allowed user")
	}
	v, err := c.Exchange(&wire.PostApproval{Call: pendingCall(e)}, nil)
	var refused *wire.Error
	switch {
	case errors.As(err, &refused):
		// Unavailable is passing (Mattermost unreachable); anything
		// else (not a chat session, a thread it does not hear) is final.
		return refused.Kind == wire.Unavailable, refused
	case err != nil:
		return true, err
	}
	if m, ok := v.(*wire.ApprovalPosted); !ok || m.ID != e.ID {
		return false, errors.New("gatewayd confirmed another approval, or sent " + v.Tag())
	}
	b.log.Info("approval posted to the chat", "approval", e.ID)
	// Wait for the owner's answer; EOF means gatewayd went away.
	v, err = c.Recv()
	if err != nil {
		return true, err
	}
	ans, ok := v.(*wire.OwnerAnswer)
	if !ok || ans.ID != e.ID || !approverPattern.MatchString(ans.Approver) {
		b.log.Warn("gateway.sock: refused a malformed answer", "approval", e.ID, "message", v.Tag())
		c.Send(&wire.Error{Op: "owner_answer", Kind: wire.Invalid, Msg: "an answer names the approval it was sent for and a mattermost:<user id> approver"})
		return true, errors.New("malformed answer")
	}
	// Held before the answer is taken: once it is, the approval stops
	// pending, and the courier loop must not close this connection
	// before gatewayd hears the outcome (nor after, while a session
	// allowance made from it lives).
	b.holding.Store(e.ID, true)
	defer b.holding.Delete(e.ID)
	var out strict.Variant
	if ans.Approve {
		out = b.approve(e.ID, ans.Code, ans.Approver, ans.Scope, "approved in the chat", "approver", ans.Approver)
	} else {
		out = b.refuse(e.ID, ans.Code, ans.Reason, ans.Approver, "refused in the chat", "approver", ans.Approver)
	}
	if afterAnswer != nil {
		afterAnswer()
	}
	c.Send(out)
	if _, ok := out.(*wire.Answered); ok {
		if ans.Approve && ans.Scope != wire.ScopeCall && b.live(e.ID) {
			b.holdAllowance(ctx, c, e.ID)
		}
		return false, nil
	}
	return true, errors.New("answer not taken")
}
