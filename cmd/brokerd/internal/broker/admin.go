package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/pending"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// serveAdmin handles one connection on admin.sock: queries and answers,
// one message at a time. The owner's answer is given by id only; what
// bxctl shows is fetched from here, never from loopd.
func (b *Broker) serveAdmin(ctx context.Context, peer sockets.Peer, c net.Conn) {
	for {
		v, err := readOne(c)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				b.send(c, &wire.Error{Op: "admin", Kind: wire.Invalid, Msg: "the message did not decode: " + err.Error()})
			}
			return
		}
		var out strict.Variant
		switch m := v.(type) {
		case *wire.ListApprovals:
			calls := []wire.PendingCall{}
			for _, e := range b.pending.List() {
				calls = append(calls, pendingCall(e))
			}
			out = &wire.Approvals{Calls: calls}
		case *wire.GetApproval:
			e, err := b.pending.Get(m.ID)
			if err != nil {
				out = notPending("get_approval", m.ID)
			} else {
				out = &wire.Approval{Call: pendingCall(e)}
			}
		case *wire.Approve:
			if _, err := b.pending.ApproveBy(m.ID, adminApprover(peer)); err != nil {
				out = notPending("approve", m.ID)
			} else {
				b.log.Info("approved by the owner", "id", m.ID, "uid", peer.UID())
				out = &wire.Answered{ID: m.ID, Outcome: "approved", Msg: "approved; brokerd decides the call again against the current grants before it runs"}
			}
		case *wire.Refuse:
			if _, err := b.pending.RefuseBy(m.ID, m.Reason, adminApprover(peer)); err != nil {
				out = &wire.Error{Op: "refuse", Kind: wire.Invalid, Msg: err.Error()}
			} else {
				b.log.Info("refused by the owner", "id", m.ID, "uid", peer.UID())
				out = &wire.Answered{ID: m.ID, Outcome: "refused", Msg: "refused"}
			}
		default:
			b.forbidden(c, peer, AdminSocket, v)
			return
		}
		if !b.send(c, out) {
			return
		}
	}
}

func notPending(op string, id int64) *wire.Error {
	return wire.Errorf(op, wire.Invalid, "approval %d is not pending (unknown, answered, expired or withdrawn)", id)
}

func pendingCall(e pending.Entry) wire.PendingCall {
	return wire.PendingCall{ID: e.ID, Session: e.Session, Tool: e.Tool, Arguments: e.Arguments, Expires: e.Expires.UTC().Format(time.RFC3339)}
}

// adminApprover names an answer given on admin.sock, for the audit log.
func adminApprover(peer sockets.Peer) string { return fmt.Sprintf("admin.sock:uid %d", peer.UID()) }
