package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/ledger"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/pending"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Session allowances (policy rule 10; docs/design.md "Session
// allowances"). One is made only here, from an owner's answer that
// carried the approval's code and said `session`, after the re-decision
// allowed the call; the ledger records it and holds the live set.

// allowedOf is the ledger's records as policy reads them.
func allowedOf(live []audit.Allowance) []policy.Allowed {
	out := make([]policy.Allowed, 0, len(live))
	for _, a := range live {
		made, err := time.Parse(audit.TimeLayout, a.Time)
		if err != nil {
			made = time.Time{} // cannot happen for a parsed record; an unknown age is too old
		}
		m := make([]policy.GrantRef, len(a.Matched))
		for i, g := range a.Matched {
			m[i] = policy.GrantRef{ID: g.ID, SHA256: g.SHA256}
		}
		out = append(out, policy.Allowed{ID: a.Decision, Scope: a.Scope, Grant: policy.GrantRef{ID: a.Grant.ID, SHA256: a.Grant.SHA256},
			Matched: m, State: policy.Session{Taint: a.Taint, Untrusted: a.Untrusted, Recalled: a.Recalled}, Made: made})
	}
	return out
}

// scopeRefusal is why an answer with scope cannot be taken for a call of
// tool, or "": checked before the answer is taken, so a refused answer
// leaves the approval pending.
func scopeRefusal(tool string, scope wire.AnswerScope) string {
	switch {
	case scope == wire.ScopeCall:
		return ""
	case tool == toolset.Consult:
		return "a consult cannot be approved for the session: the owner reads every payload that leaves"
	case scope == wire.ScopeSessionDir && tool != toolset.ReadFile && tool != toolset.WriteFile:
		return "`session dir` is for read_file and write_file only"
	case scope == wire.ScopeAlways && tool != toolset.ReadFile && tool != toolset.HTTPFetch:
		return "`always` is for read_file and http_fetch only: a grant names one file or one host, never one shell line or one file to write; answer `session`, or write the grant yourself"
	case tool != toolset.ReadFile && tool != toolset.WriteFile && tool != toolset.HTTPFetch && tool != toolset.Shell:
		return "no session allowance can cover a " + tool + " call"
	}
	return ""
}

// makeAllowance makes the session allowance an approved, allowed call's
// answer asked for, and says what happened, for the owner.
func (b *Broker) makeAllowance(req *wire.ToolRequest, seq int64, a pending.Answer, ask *policy.Ask, dec policy.Decision, gs *grant.Set) string {
	switch a.Scope {
	case wire.ScopeCall:
		return "this call only"
	case wire.ScopeAlways:
		return b.propose(seq, a, ask, dec, gs)
	}
	scope, err := policy.ScopeOf(ask, a.Scope == wire.ScopeSessionDir)
	if err != nil {
		return "this call only: " + err.Error()
	}
	g := dec.Grant()
	rec := audit.Allowance{Decision: seq, Session: req.Session, Epoch: req.Epoch, Scope: scope,
		Grant: audit.GrantRef{ID: g.ID, SHA256: g.SHA256}, Approver: a.Approver}
	for _, m := range dec.Matched() {
		rec.Matched = append(rec.Matched, audit.GrantRef{ID: m.ID, SHA256: m.SHA256})
	}
	if _, err := b.ledger.Allow(rec); err != nil {
		b.log.Error("session allowance not made", "approval", seq, "err", err.Error())
		return "this call only: no session allowance was made (" + err.Error() + "); see docs/runbook.md#allowance-refused"
	}
	b.log.Info("session allowance made", "allowance", seq, "session", req.Session, "epoch", req.Epoch, "scope", ScopeText(scope), "approver", a.Approver)
	return fmt.Sprintf("session allowance %d made: %s, without asking, in this session until its epoch ends (compaction), "+
		"for at most %v, while grant %q is unchanged and the session is no more tainted than now; `!revoke %d` or `bxctl allowances revoke %d` ends it",
		seq, ScopeText(scope), policy.MaxAllowanceAge, g.ID, seq, seq)
}

// ScopeText says exactly what a scope covers, on one line.
func ScopeText(s audit.Scope) string {
	switch {
	case s.Tool == toolset.HTTPFetch:
		return "http_fetch of any URL on host " + escape.Line(s.Host) + " exactly"
	case s.Tool == toolset.Shell:
		return fmt.Sprintf("shell running exactly the line %q in %s (any other line, a wrapper such as env, nice, timeout or time, or an interpreter given code, asks again)",
			escape.Line(s.Command), escape.Line(s.Workdir))
	case s.Dir:
		return s.Tool + " of any file directly in " + escape.Line(s.Path) + "/ (not in its subdirectories)"
	}
	return s.Tool + " of exactly " + escape.Line(s.Path)
}

// revoke ends session allowance id at the owner's word.
func (b *Broker) revoke(id int64, by string) strict.Variant {
	if _, err := b.ledger.EndAllowance(id, audit.EndRevoked, by); err != nil {
		if errors.Is(err, ledger.ErrNoAllowance) {
			return wire.Errorf("revoke_allowance", wire.Invalid, "no session allowance %d is live (it ended, or was never made); bxctl allowances lists the live ones; see docs/runbook.md#allowance-not-live", id)
		}
		return wire.Errorf("revoke_allowance", wire.Unavailable, "session allowance %d could not be revoked: %v; see docs/runbook.md#audit-unavailable", id, err)
	}
	b.log.Info("session allowance revoked", "allowance", id, "by", by)
	return &wire.Answered{ID: id, Outcome: "revoked", Msg: fmt.Sprintf("session allowance %d revoked: the calls it covered ask again", id)}
}

// allowanceInfo is a live allowance as bxctl shows it.
func allowanceInfo(a audit.Allowance) wire.AllowanceInfo {
	made, _ := time.Parse(audit.TimeLayout, a.Time)
	return wire.AllowanceInfo{ID: a.Decision, Session: a.Session, Epoch: a.Epoch, Tool: a.Scope.Tool, Scope: ScopeText(a.Scope),
		Grant: a.Grant.ID, Approver: a.Approver, Made: made.UTC().Format(time.RFC3339),
		Expires: made.Add(policy.MaxAllowanceAge).UTC().Format(time.RFC3339)}
}

// live reports whether session allowance id is live.
func (b *Broker) live(id int64) bool {
	for _, a := range b.ledger.Allowances() {
		if a.Decision == id {
			return true
		}
	}
	return false
}

// settled hands the outcome of approval id's answer to the approve
// waiting for it, if any.
func (b *Broker) settled(id int64, msg string) {
	if ch, ok := b.settle.Load(id); ok {
		select {
		case ch.(chan string) <- msg:
		default:
		}
	}
}

// holdAllowance keeps a chat approval's connection open while the
// session allowance made from it lives, so that `!revoke ID` in its
// thread reaches brokerd; closing it (the allowance ended) tells gatewayd
// to say so in the thread.
func (b *Broker) holdAllowance(ctx context.Context, c *rpc.Conn, id int64) {
	b.holding.Store(id, true)
	defer b.holding.Delete(id)
	frames := make(chan strict.Variant, 1)
	go func() {
		defer close(frames)
		v, err := c.Recv()
		if err == nil {
			frames <- v
		}
	}()
	t := time.NewTicker(courierPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case v, ok := <-frames:
			if !ok {
				return // gatewayd went away: `!revoke` is then bxctl's
			}
			r, ok := v.(*wire.AllowanceRevoke)
			if !ok || r.ID != id || !approverPattern.MatchString(r.Approver) {
				b.log.Warn("gateway.sock: refused a malformed revocation", "allowance", id, "message", v.Tag())
				c.Send(&wire.Error{Op: "allowance_revoke", Kind: wire.Invalid, Msg: "a revocation names the allowance its connection holds and a mattermost:<user id> approver"})
				return
			}
			c.Send(b.revoke(id, r.Approver))
			return
		case <-t.C:
			if !b.live(id) {
				return
			}
		}
	}
}
