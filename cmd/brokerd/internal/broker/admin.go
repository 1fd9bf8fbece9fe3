package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/pending"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// adminServer is admin.sock: queries and answers, one message at a time.
// The owner's answer is given by id only; what bxctl shows is fetched
// from here, never from loopd.
func (b *Broker) adminServer() *rpc.Server {
	return rpc.NewServer(&wire.Admin, b.log,
		rpc.On(func(_ context.Context, _ sockets.Peer, _ *wire.ListApprovals) strict.Variant {
			calls := []wire.PendingCall{}
			for _, e := range b.pending.List() {
				calls = append(calls, pendingCall(e))
			}
			return &wire.Approvals{Calls: calls}
		}),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.GetApproval) strict.Variant {
			e, err := b.pending.Get(m.ID)
			if err != nil {
				return notPending("get_approval", m.ID)
			}
			return &wire.Approval{Call: pendingCall(e)}
		}),
		rpc.On(func(_ context.Context, peer sockets.Peer, m *wire.Approve) strict.Variant {
			return b.approve(m.ID, m.Code, adminApprover(peer), m.Scope, "approved by the owner", "uid", peer.UID())
		}),
		rpc.On(func(_ context.Context, _ sockets.Peer, _ *wire.ListAllowances) strict.Variant {
			out := []wire.AllowanceInfo{}
			for _, a := range b.ledger.Allowances() {
				out = append(out, allowanceInfo(a))
			}
			return &wire.Allowances{Allowances: out}
		}),
		rpc.On(func(_ context.Context, peer sockets.Peer, m *wire.RevokeAllowance) strict.Variant {
			return b.revoke(m.ID, adminApprover(peer))
		}),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.DropProposal) strict.Variant {
			return b.dropProposal(m.ID)
		}),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.WriteProposal) strict.Variant {
			return b.writeSuggested(m.ID, m.Text)
		}),
		rpc.On(func(_ context.Context, peer sockets.Peer, m *wire.Refuse) strict.Variant {
			return b.refuse(m.ID, m.Code, m.Reason, adminApprover(peer), "refused by the owner", "uid", peer.UID())
		}),
	)
}

// approve takes an owner's yes to approval id, from admin.sock or the
// chat (the courier), and logs it with who gave it. An answer whose code
// is not the approval's answers nothing.
func (b *Broker) approve(id int64, code, approver string, scope wire.AnswerScope, logMsg string, who ...any) strict.Variant {
	done := make(chan string, 1)
	b.settle.Store(id, done)
	defer b.settle.Delete(id)
	_, err := b.pending.ApproveScoped(id, code, approver, scope, func(e pending.Entry) error {
		if why := scopeRefusal(e.Tool, scope); why != "" {
			return errScope{why}
		}
		return nil
	})
	var es errScope
	if errors.As(err, &es) {
		b.log.Warn("approval answer refused: "+es.why+"; see docs/runbook.md#allowance-refused", append([]any{"id", id}, who...)...)
		return wire.Errorf("approve", wire.Denied, "approval %d: %s; nothing was answered: approve it for this call only, or refuse it; see docs/runbook.md#allowance-refused", id, es.why)
	}
	if err != nil {
		return b.notTaken("approve", id, err, who)
	}
	b.log.Info(logMsg, append([]any{"id", id, "scope", string(scope)}, who...)...)
	msg := "approved; brokerd decided the call again against the current grants: "
	select {
	case m := <-done:
		msg += m
	case <-time.After(10 * time.Second):
		msg += "its outcome is not known yet (bxctl allowances lists the live session allowances)"
	}
	outcome := "approved"
	if scope != wire.ScopeCall && b.live(id) {
		outcome = wire.OutcomeAllowance
	}
	return &wire.Answered{ID: id, Outcome: outcome, Msg: msg}
}

// errScope refuses an answer whose scope the call cannot take.
type errScope struct{ why string }

func (e errScope) Error() string { return e.why }

// refuse takes an owner's no to approval id.
func (b *Broker) refuse(id int64, code, reason, approver, logMsg string, who ...any) strict.Variant {
	if _, err := b.pending.RefuseBy(id, code, reason, approver); err != nil {
		if errors.Is(err, pending.ErrWrongCode) || errors.Is(err, pending.ErrNotPending) {
			return b.notTaken("refuse", id, err, who)
		}
		return &wire.Error{Op: "refuse", Kind: wire.Invalid, Msg: err.Error()}
	}
	b.log.Info(logMsg, append([]any{"id", id}, who...)...)
	return &wire.Answered{ID: id, Outcome: "refused", Msg: "refused"}
}

// notTaken is the refusal of an answer the table did not take: a wrong
// code (logged, with who sent it: an imitation of the approval may be
// at work) or an approval no longer pending.
func (b *Broker) notTaken(op string, id int64, err error, who []any) *wire.Error {
	if errors.Is(err, pending.ErrWrongCode) {
		b.log.Warn("approval answer refused: wrong code; see docs/runbook.md#approval-code-wrong", append([]any{"id", id, "op", op}, who...)...)
		return wire.Errorf(op, wire.Denied, "approval %d: that code is not this approval's; nothing was answered. Copy the code from the approval itself (bxctl approvals %d); see docs/runbook.md#approval-code-wrong", id, id)
	}
	return notPending(op, id)
}

func notPending(op string, id int64) *wire.Error {
	return wire.Errorf(op, wire.Invalid, "approval %d is not pending (unknown, answered, expired or withdrawn)", id)
}

func pendingCall(e pending.Entry) wire.PendingCall {
	return wire.PendingCall{ID: e.ID, Session: e.Session, Tool: e.Tool, Arguments: e.Arguments, Expires: e.Expires.UTC().Format(time.RFC3339), Code: e.Code,
		SessionScope: e.SessionScope}
}

// adminApprover names an answer given on admin.sock, for the audit log.
func adminApprover(peer sockets.Peer) string { return fmt.Sprintf("admin.sock:uid %d", peer.UID()) }
