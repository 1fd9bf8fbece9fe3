package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
	"wntrmute.dev/boxmaker/pkg/model/consult"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// A consult, once allowed, goes: its request (every byte of the body, the
// URL, the model, the grant, the session, the time, the audit decision by
// hash) into the consult log, fsynced; only then consult_pending to loopd
// and the container; then the response into the consult log; only then
// the result record in the audit log and the answer to loopd, labelled
// with the grant's class and untrusted. A request that cannot be logged
// is never sent, and an answer that cannot be logged is never shown.

// consultState is the consult log, or why it could not be opened: then
// every consult fails, and every other tool is unaffected.
type consultState struct {
	log *consultlog.Writer
	err error
}

// openConsultLog opens the consult log. A log that does not end at its
// head record (cut off, deleted, or gone on past it) refuses brokerd's
// start, as the audit log's does: its lost lines may be payloads that
// left, and nothing else may show them. Any other failure (a broken
// chain, a torn line, a write that fails) fails every consult only.
func openConsultLog(log *slog.Logger, cfg brokerd.Config) (consultState, error) {
	w, err := consultlog.Open(layout.ConsultLog.In(cfg.StateDir))
	var he *audit.HeadError
	switch {
	case errors.As(err, &he):
		return consultState{}, err
	case err != nil:
		log.Error("the consult log cannot be opened; every consult fails until it is fixed; see docs/runbook.md#consult-log-damaged", "err", err.Error())
		return consultState{err: err}, nil
	}
	return consultState{log: w}, nil
}

func (s consultState) close() {
	if s.log != nil {
		s.log.Close()
	}
}

// consultWait is how long past its total bound brokerd tells loopd to
// wait: the containers' creation and removal.
const consultWait = 30 * time.Second

func failed(msg string) *wire.ToolResult {
	return &wire.ToolResult{Status: wire.StatusFailed, Output: msg, Label: dataclass.Label{Class: dataclass.Public}}
}

// consultShown is what the owner approves: the URL, the model and the
// body itself, byte for byte (the body is JSON, kept raw).
func consultShown(c policy.ConsultCall) json.RawMessage {
	b, err := strict.Marshal(struct {
		URL   string          `json:"url"`
		Model string          `json:"model"`
		Body  json.RawMessage `json:"body"`
	}{c.URL.String(), c.Model, json.RawMessage(c.Body)})
	if err != nil {
		b, _ = strict.Marshal(map[string]string{"url": c.URL.String(), "model": c.Model, "body": c.Body})
	}
	return b
}

// runConsult runs an allowed consult (see the top of this file).
func (b *Broker) runConsult(ctx context.Context, c *rpc.Conn, session string, seq int64, d policy.Decision, call policy.ConsultCall) *wire.ToolResult {
	if _, none := b.runner.(runner.Refusing); none {
		// Nothing could send it: log no request that never leaves.
		return failed("the call could not be run: " + runner.ErrUnavailable.Error())
	}
	if b.consult.err != nil || b.consult.log == nil {
		return failed("consult_log_unavailable: the consult log cannot be written, so nothing is sent; see docs/runbook.md#consult-log-damaged")
	}
	hash, err := consultlog.AuditHash(layout.Audit.In(b.cfg.StateDir), seq)
	if err != nil {
		b.log.Error("consult: the decision's audit line could not be read; nothing is sent", "decision", seq, "err", err.Error())
		return failed("consult_log_unavailable: the consult could not be linked to its audit record, so nothing is sent; see docs/runbook.md#consult-log-damaged")
	}
	g := d.Grant()
	rseq, _, err := b.consult.log.Request(consultlog.Request{Session: session, Decision: seq, DecisionSHA256: hash,
		Grant: consultlog.GrantRef{ID: g.ID, SHA256: g.SHA256}, Model: call.Model, URL: call.URL.String(), Body: call.Body})
	if err != nil {
		b.log.Error("consult: the request could not be logged; nothing is sent", "decision", seq, "err", err.Error())
		return failed("consult_log_unavailable: the payload could not be logged, so nothing is sent; see docs/runbook.md#consult-log-damaged")
	}
	if c != nil {
		exp := b.now().Add(time.Duration(call.TotalMS)*time.Millisecond + consultWait)
		if err := c.Send(&wire.ConsultPending{ID: seq, Expires: exp.UTC().Format(time.RFC3339)}); err != nil {
			b.log.Warn("write", "err", err.Error())
		}
		// loopd hanging up (the owner stopped the turn, loopd stopped)
		// stops the consult: nobody is left to read the answer, which is
		// still logged.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		gone := c.Gone()
		go func() {
			select {
			case <-gone:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	out, rerr := b.runner.Run(ctx, d)
	resp := consultlog.Response{Request: rseq}
	var res consult.Result
	if rerr == nil && strict.Unmarshal(bytes.TrimSpace([]byte(out.Stdout)), &res) == nil {
		a := res.Answer
		resp.Status, resp.Content, resp.Reasoning, resp.Finish, resp.Truncated = a.Status, a.Content, a.Reasoning, a.Finish, a.Truncated
		resp.StreamBytes, resp.StreamSHA256, resp.Error = a.StreamBytes, a.StreamSHA256, res.Error
	} else {
		resp.Error = runFailure(out, rerr)
	}
	if _, err := b.consult.log.Response(resp); err != nil {
		b.log.Error("consult: the response could not be logged; it is not shown", "decision", seq, "err", err.Error())
		return failed("consult_log_unavailable: the answer could not be logged, so it is not shown; see docs/runbook.md#consult-log-damaged")
	}
	if rerr != nil {
		b.log.Warn("run failed", "decision", seq, "err", rerr.Error())
		return failed("the call could not be run: " + rerr.Error())
	}
	if resp.Error != "" {
		return b.release(seq, "consult failed: "+resp.Error, max(out.Exit, 1), wire.StatusFailed, d.Class(), d.Untrusted())
	}
	text := fmt.Sprintf("[consult: the answer of %s at %s: untrusted text from outside; its reasoning is kept in the consult log, not here]\n%s",
		call.Model, call.URL.Host(), resp.Content)
	if resp.Truncated {
		text += "\n[the answer was cut at its cap]"
	}
	return b.release(seq, text, out.Exit, wire.StatusRan, d.Class(), d.Untrusted())
}

// runFailure is the logged reason of a run that printed no result.
func runFailure(out runner.Output, err error) string {
	switch {
	case err != nil:
		return "the call could not be run: " + err.Error()
	case out.Stopped != "":
		return "brokerd stopped the tool: " + out.Stopped + "; see docs/runbook.md#consult-unbounded"
	}
	last := strings.TrimSpace(out.Stderr)
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	return truncate.Ellipsis("the toolkit printed no result: "+last, 1000)
}
