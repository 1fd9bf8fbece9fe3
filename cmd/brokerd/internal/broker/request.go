package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/pending"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// serveTool is broker.sock's one request per connection: a tool call.
func (b *Broker) serveTool(ctx context.Context, _ sockets.Peer, c *rpc.Conn, req *wire.ToolRequest) error {
	if err := wire.CheckSessionID(req.Session); err != nil {
		return c.Send(&wire.Error{Op: "tool_request", Kind: wire.Invalid, Msg: err.Error()})
	}
	return c.Send(b.handle(ctx, c, req))
}

func denied(msg string) *wire.ToolResult {
	return &wire.ToolResult{Status: wire.StatusDenied, Output: msg, Label: dataclass.Label{Class: dataclass.Public}}
}

// unavailable is the answer when the decision cannot be recorded.
func unavailable(err error) *wire.ToolResult {
	return denied("audit_unavailable: the decision could not be recorded, so nothing runs (" + err.Error() + "); see docs/runbook.md#audit-unavailable")
}

// handle decides one request and carries it to its end.
func (b *Broker) handle(ctx context.Context, c *rpc.Conn, req *wire.ToolRequest) *wire.ToolResult {
	preq := policy.Request{Tool: req.Tool, Arguments: req.Arguments, Endpoint: consultEndpoint(b.cfg), MCP: b.mcpCatalog(), Attachments: b.attachmentsDir(req.Session)}
	gs, gerr := grant.LoadDir(b.cfg.GrantsDir, b.cfg.Owners())
	if gerr != nil {
		b.log.Error("grants are invalid; every call is denied; see docs/runbook.md#grants-invalid", "err", gerr.Error())
	}
	var (
		dec  policy.Decision
		ask  *policy.Ask
		den  *policy.Denial
		gone error
	)
	seq, err := b.ledger.DecideAllowing(req.Session, req.Epoch, func(s policy.Session, unreadable error, live []audit.Allowance) (audit.DecisionRecord, []policy.Lapse) {
		if unreadable != nil {
			gone = unreadable
			return audit.DecisionRecord{Tool: toolOf(req.Tool), Arguments: auditArgs(nil, req.Arguments), Verdict: audit.Verdict{Outcome: audit.Denied, Reason: audit.StateUnreadable}}, nil
		}
		var lapsed []policy.Lapse
		dec, ask, den, lapsed = policy.DecideAllowing(gs, preq, s, b.now(), allowedOf(live))
		switch {
		case den != nil:
			return denialRecord(den, req.Arguments), lapsed
		case ask != nil:
			g := ask.Grant
			return audit.DecisionRecord{Tool: ask.Tool, Arguments: auditArgs(ask.Args, req.Arguments), Verdict: audit.Verdict{Outcome: audit.Ask, Grant: grantRef(&g)}}, lapsed
		}
		g := dec.Grant()
		return audit.DecisionRecord{Tool: dec.Tool(), Arguments: auditArgs(dec.Args(), req.Arguments), Verdict: audit.Verdict{Outcome: audit.Allowed, Grant: grantRef(&g)},
			Allowance: dec.Allowance()}, lapsed
	})
	switch {
	case err != nil:
		return unavailable(err)
	case gone != nil:
		return denied(fmt.Sprintf("state_unreadable: this session's state cannot be read, so it is treated as secret and untrusted (%v); see docs/runbook.md#session-state", gone))
	case den != nil:
		return denied(den.Error())
	case ask != nil:
		return b.await(ctx, c, req, preq, seq, ask)
	}
	return b.run(ctx, c, req.Session, seq, dec)
}

// toolOf is the tool a record names: the target, or call_tool itself when
// its arguments named none (the one record the audit log allows it in).
func toolOf(t string) string {
	if t == "" {
		return toolset.CallTool
	}
	return t
}

// await parks an ask until the owner answers, it expires, or loopd goes.
func (b *Broker) await(ctx context.Context, c *rpc.Conn, req *wire.ToolRequest, preq policy.Request, seq int64, ask *policy.Ask) *wire.ToolResult {
	args, _ := ask.Args.MarshalJSON()
	if ask.Consult != nil {
		// The owner approves the payload itself, every byte of it.
		args = consultShown(*ask.Consult)
	}
	var scope string
	if sc, err := policy.ScopeOf(ask, false); err == nil {
		scope = ScopeText(sc)
	}
	e, answers, err := b.pending.Add(pending.Entry{ID: seq, Session: req.Session, Tool: ask.Tool, Arguments: args, SessionScope: scope})
	if err != nil {
		return denied("the call could not be parked for approval: " + err.Error())
	}
	if err := c.Send(&wire.ToolPending{ID: seq, Tool: ask.Tool, Expires: e.Expires.UTC().Format(time.RFC3339)}); err != nil {
		b.log.Warn("write", "err", err.Error())
		b.pending.Withdraw(seq)
	}
	// loopd closing its connection withdraws the call.
	closed := c.Gone()
	var a pending.Answer
	select {
	case a = <-answers:
	case <-closed:
		b.pending.Withdraw(seq)
		a = <-answers
	case <-ctx.Done():
		b.pending.Withdraw(seq)
		a = <-answers
	}
	return b.answered(ctx, c, req, preq, seq, a, ask)
}

// answered records the owner's answer (or its absence) and acts on it.
func (b *Broker) answered(ctx context.Context, c *rpc.Conn, req *wire.ToolRequest, preq policy.Request, seq int64, a pending.Answer, ask *policy.Ask) *wire.ToolResult {
	if a.Kind != pending.Approved {
		b.settled(seq, "")
		answer, reason := audit.AnswerExpired, audit.Expired
		msg := "the approval expired unanswered"
		if a.Kind == pending.Refused {
			answer, reason, msg = audit.AnswerRefused, audit.Refused, "refused by the owner"
			if a.Reason != "" {
				msg += ": " + a.Reason
			}
		}
		_, err := b.ledger.Answer(seq, func(policy.Session, error) audit.Approval {
			return audit.Approval{Approver: a.Approver, Answer: answer, Verdict: audit.Verdict{Outcome: audit.Denied, Reason: reason, Detail: a.Reason}}
		})
		if err != nil {
			return unavailable(err)
		}
		return denied(msg)
	}
	gs, _ := grant.LoadDir(b.cfg.GrantsDir, b.cfg.Owners())
	preq.MCP = b.mcpCatalog() // read afresh, like the grants
	var dec policy.Decision
	var den *policy.Denial
	_, err := b.ledger.Answer(seq, func(s policy.Session, unreadable error) audit.Approval {
		if unreadable != nil {
			return audit.Approval{Approver: a.Approver, Answer: audit.AnswerApproved, Verdict: audit.Verdict{Outcome: audit.Denied, Reason: audit.StateUnreadable}}
		}
		dec, den = policy.Redecide(gs, preq, s, b.now())
		if den != nil {
			// The re-decision's denial, recorded as a decision's would be
			// (the ledger sets its taint and untrusted).
			return audit.Approval{Approver: a.Approver, Answer: audit.AnswerApproved, Verdict: denialRecord(den, preq.Arguments).Verdict}
		}
		g := dec.Grant()
		return audit.Approval{Approver: a.Approver, Answer: audit.AnswerApproved, Verdict: audit.Verdict{Outcome: audit.Allowed, Grant: grantRef(&g)}}
	})
	switch {
	case err != nil:
		b.settled(seq, "nothing ran: the answer could not be recorded")
		return unavailable(err)
	case den != nil:
		b.settled(seq, "nothing ran: the grants or the session changed since the call was asked, so it was denied (no allowance made)")
		return denied("approved, but the grants or the session changed since: " + den.Error())
	case !dec.Valid():
		b.settled(seq, "nothing ran: the session's state cannot be read (no allowance made)")
		return denied("state_unreadable: this session's state cannot be read; see docs/runbook.md#session-state")
	}
	b.settled(seq, b.makeAllowance(req, seq, a, ask, dec, gs))
	return b.run(ctx, c, req.Session, seq, dec)
}

// run runs an allowed call and records its result by hash and size. A
// failure to run carries fixed text only and raises no taint.
func (b *Broker) run(ctx context.Context, c *rpc.Conn, session string, seq int64, d policy.Decision) *wire.ToolResult {
	if d.Builtin() {
		return b.memory(ctx, session, seq, d)
	}
	if call, ok := d.Consult(); ok {
		return b.runConsult(ctx, c, session, seq, d, call)
	}
	if m, ok := d.MCP(); ok {
		return b.runMCP(ctx, seq, d, m)
	}
	if a, ok := d.Attachment(); ok {
		return b.readAttachment(seq, d, a)
	}
	if p, ok := d.PostFile(); ok {
		return b.postFile(seq, session, d, p)
	}
	out, err := b.runner.Run(ctx, d)
	if err != nil {
		b.log.Warn("run failed", "decision", seq, "err", err.Error())
		// Runner errors are fixed text (package runner), never output.
		return &wire.ToolResult{Status: wire.StatusFailed, Output: "the call could not be run: " + err.Error(), Label: dataclass.Label{Class: dataclass.Public}}
	}
	status := wire.StatusRan
	if out.Exit != 0 || out.Stopped != "" {
		status = wire.StatusFailed
	}
	return b.release(seq, resultText(out), out.Exit, status, d.Class(), d.Untrusted())
}

// resultText is what the model sees of a run: stdout, then stderr under
// a marker line if there was any, then brokerd's note if it stopped the
// tool. All of it is the tool's output, labelled as such.
func resultText(out runner.Output) string {
	text := out.Stdout
	if out.Stderr != "" {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "[stderr]\n" + out.Stderr
	}
	if out.Stopped != "" {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "[brokerd stopped the tool: " + out.Stopped + "; see docs/runbook.md#tool-stopped]"
	}
	return text
}

// release records a result by hash and size and only then hands it back:
// the session's taint must rise before anything of the output is seen.
func (b *Broker) release(seq int64, output string, exit int, status wire.ToolStatus, class dataclass.Class, untrusted bool) *wire.ToolResult {
	return b.releasePinned(seq, output, exit, status, class, untrusted, "")
}

// releasePinned is release for an MCP call: its record also names the
// pin (listing sum) the server's live listing was checked against.
func (b *Broker) releasePinned(seq int64, output string, exit int, status wire.ToolStatus, class dataclass.Class, untrusted bool, pin string) *wire.ToolResult {
	sum := sha256.Sum256([]byte(output))
	if _, err := b.ledger.Result(audit.Result{Decision: seq, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(output)),
		Exit: exit, Class: class, Untrusted: untrusted, MCPPin: pin}); err != nil {
		return unavailable(err)
	}
	text, _ := truncate.Bytes(output, b.cfg.ResultCapBytes())
	return &wire.ToolResult{Status: status, Output: text, Label: dataclass.Label{Class: class, Untrusted: untrusted}}
}
