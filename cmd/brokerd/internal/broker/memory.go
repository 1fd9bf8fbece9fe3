package broker

import (
	"context"
	"errors"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// memory forwards a decided memory tool call to memoryd with the session's
// state as brokerd tracks it. memoryd's label of its result is joined with
// the decision's floor (private), never lowered; a failure is fixed text.
func (b *Broker) memory(ctx context.Context, session string, seq int64, d policy.Decision) *wire.ToolResult {
	fail := func(why string) *wire.ToolResult {
		return &wire.ToolResult{Status: wire.StatusFailed, Label: dataclass.Label{Class: dataclass.Public},
			Output: "the memory tool could not run: " + why + "; see docs/runbook.md#runner-unavailable"}
	}
	if b.cfg.MemtoolSocket == "" {
		return fail("brokerd has no memtool.sock (memoryd) to reach")
	}
	args, _ := d.Args().MarshalJSON()
	s := d.Session()
	r, err := rpc.Ask[*wire.ToolResult](ctx, &wire.Memtool, b.cfg.MemtoolSocket,
		&wire.MemtoolCall{Session: session, Tool: d.Tool(), Arguments: args, Taint: s.Taint, Untrusted: s.Untrusted})
	if err != nil {
		// Fixed text: what memoryd or the wire said stays in the log,
		// never in a tool result.
		b.log.Warn("memory tool call failed", "socket", wire.Memtool.Name, "decision", seq, "err", err.Error())
		return fail(memtoolFailure(err))
	}
	exit := 0
	if r.Status != wire.StatusRan {
		exit = 1
	}
	l := d.Label().Join(r.Label) // the grant's label, raised by what memoryd says the answer holds
	return b.release(seq, r.Output, exit, r.Status, l.Class, l.Untrusted)
}

// memtoolFailure is the fixed text of a failed memtool.sock call.
func memtoolFailure(err error) string {
	var e *rpc.Error
	if !errors.As(err, &e) {
		return "memoryd refused the call" // a *wire.Error
	}
	switch e.Phase {
	case rpc.Dialing:
		return "memoryd is not reachable"
	case rpc.Sending:
		return "the call could not be sent to memoryd"
	case rpc.Receiving:
		return "memoryd did not answer"
	case rpc.Decoding:
		return "memoryd broke the protocol"
	}
	return "memoryd refused the call"
}
