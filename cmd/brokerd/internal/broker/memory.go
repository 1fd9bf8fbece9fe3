package broker

import (
	"context"
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/dataclass"
	"wntrmute.dev/boxmaker/pkg/frame"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// memoryTimeout bounds one memory tool call end to end.
const memoryTimeout = 60 * time.Second

// memory forwards a decided memory tool call to memoryd with the session's
// state as brokerd tracks it. memoryd's label of its result is joined with
// the decision's floor (private), never lowered; a failure is fixed text.
func (b *Broker) memory(ctx context.Context, session string, seq int64, d policy.Decision) *wire.ToolResult {
	fail := func(why string) *wire.ToolResult {
		return &wire.ToolResult{Status: wire.StatusFailed, Class: dataclass.Public,
			Output: "the memory tool could not run: " + why + "; see docs/runbook.md#runner-unavailable"}
	}
	if b.cfg.MemtoolSocket == "" {
		return fail("brokerd has no memtool_socket (memoryd) configured")
	}
	ctx, cancel := context.WithTimeout(ctx, memoryTimeout)
	defer cancel()
	c, err := sockets.Dial(ctx, b.cfg.MemtoolSocket)
	if err != nil {
		return fail("memoryd is not reachable")
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(memoryTimeout))
	args, _ := d.Args().MarshalJSON()
	s := d.Session()
	msg, err := wire.MemtoolMessages.Encode(&wire.MemtoolCall{Session: session, Tool: d.Tool(), Arguments: args, Taint: s.Taint, Untrusted: s.Untrusted})
	if err == nil {
		err = frame.Write(c, msg, wire.BrokerFrameMax)
	}
	if err != nil {
		return fail("the call could not be sent to memoryd")
	}
	body, err := frame.Read(c, wire.BrokerFrameMax)
	if err != nil {
		return fail("memoryd did not answer")
	}
	v, err := wire.MemtoolMessages.Decode(body)
	if err != nil {
		return fail("memoryd broke the protocol")
	}
	r, ok := v.(*wire.ToolResult)
	if !ok {
		return fail("memoryd refused the call")
	}
	exit := 0
	if r.Status != wire.StatusRan {
		exit = 1
	}
	return b.release(seq, r.Output, exit, r.Status, dataclass.Join(d.Class(), r.Class), d.Untrusted() || r.Untrusted)
}
