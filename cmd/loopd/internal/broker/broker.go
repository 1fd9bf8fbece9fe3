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
	"encoding/json"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Request is one tool call for brokerd. Tool is the target tool, never
// call_tool.
type Request struct {
	Session   string
	CallID    string
	Tool      string
	Arguments json.RawMessage
	Epoch     int64 // the session's epoch: brokerd's session allowances end with it
}

// Status is how brokerd answered.
type Status int

// The statuses.
const (
	Ran    Status = iota + 1 // the tool ran; Output is what it printed
	Failed                   // the tool ran and failed; Output says why
	Denied                   // refused; Output is the reason
)

// Outcome is brokerd's answer. Class and Untrusted are brokerd's labels,
// from the grant; loopd never labels tool output itself.
type Outcome struct {
	Status    Status
	Output    string
	Class     dataclass.Class
	Untrusted bool
	// Posted is the file a post_file that ran put in outbox/, to attach
	// to the turn's answer.
	Posted *wire.PostedFile
}

// Port carries tool calls to brokerd. Call blocks until brokerd answers or
// ctx ends; pending is called with the approval id when brokerd parks the
// call for the owner. Its waits are deadlines, not per-read timeouts, so a
// trickling peer cannot hold a turn for ever.
type Port interface {
	Call(ctx context.Context, r Request, pending func(approvalID int64)) Outcome
}

// Refusing refuses every call: no tool can run until brokerd is wired in.
type Refusing struct{}

// Call implements Port.
func (Refusing) Call(context.Context, Request, func(int64)) Outcome {
	return Outcome{
		Status: Denied,
		Output: "no tool can run: loopd has no connection to brokerd; see docs/runbook.md#broker-unavailable",
		Class:  dataclass.Public,
	}
}
