package broker

import (
	"context"

	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// statusSummary answers loopd's BrokerStatusQuery on broker.sock (for
// the owner's !status): brokerd's version, the pending approvals and the
// allowances in force, by id, session, tool and expiry. It is read-only
// and carries no approval's code or arguments: what loopd learns is
// which calls wait (it sent them) and which allowances stand, nothing
// with which to answer one (answers come only through admin.sock and
// the courier's gateway.sock).
func (b *Broker) statusSummary(_ context.Context, _ sockets.Peer, _ *wire.BrokerStatusQuery) strict.Variant {
	st := &wire.BrokerStatus{Version: daemon.Version(), Approvals: []wire.ApprovalBrief{}, Allowances: []wire.AllowanceBrief{}}
	for _, e := range b.pending.List() {
		c := pendingCall(e)
		st.Approvals = append(st.Approvals, wire.ApprovalBrief{ID: c.ID, Session: c.Session, Tool: c.Tool, Expires: c.Expires})
	}
	for _, a := range b.ledger.Allowances() {
		i := allowanceInfo(a)
		st.Allowances = append(st.Allowances, wire.AllowanceBrief{ID: i.ID, Session: i.Session, Tool: i.Tool, Scope: i.Scope, Expires: i.Expires})
	}
	return st
}
