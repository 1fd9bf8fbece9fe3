// Package broker is loopd's port to brokerd: every tool call other than
// the local tools (clock, find_tool) becomes a request through it.
//
// Invariant: loopd has no authority. A Port decides nothing; it carries a
// request to brokerd and brings back brokerd's answer, labelled by brokerd.
// [Client] is the Port over brokerd's broker.sock, one connection per call,
// with bounded waits (an approval included); [Refusing], for a loopd
// configured without brokerd, refuses every call with a reason the owner
// can act on. Either way, a failure is a denial, never a result.
package broker

import (
	"context"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Port carries tool calls to brokerd, in broker.sock's own types: the
// request as loopd sends it (Tool is the target tool, never call_tool;
// Epoch the session's, which brokerd's session allowances end with) and
// brokerd's answer as it came, its status and labels brokerd's (loopd
// never labels tool output itself). Call blocks until brokerd answers or
// ctx ends; pending is called with the approval id when brokerd parks the
// call for the owner. Its waits are deadlines, not per-read timeouts, so a
// trickling peer cannot hold a turn for ever.
type Port interface {
	Call(ctx context.Context, r wire.ToolRequest, pending func(approvalID int64)) wire.ToolResult
}

// Refusing refuses every call: no tool can run until brokerd is wired in.
type Refusing struct{}

// Call implements Port.
func (Refusing) Call(context.Context, wire.ToolRequest, func(int64)) wire.ToolResult {
	return wire.ToolResult{
		Status: wire.StatusDenied,
		Output: "no tool can run: loopd has no connection to brokerd; see docs/runbook.md#broker-unavailable",
		Label:  dataclass.Label{Class: dataclass.Public},
	}
}
