package runner

import (
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
)

// A consult is slow by nature (a hosted reasoning model thinks for
// minutes), so its container's time limit is not timeout_s but the
// consult's own total bound from brokerd's [consult] table, plus
// consultMargin for the toolkit to report the bound itself: the toolkit
// stops at the total bound with a clear message, and the runner's limit
// is the backstop. loopd waits that long only because brokerd tells it
// (wire.ConsultPending).
const consultMargin = 5 * time.Second

// limit is the time limit of the call d: the consult's bound, or the
// tool's configured limit.
func (c Config) limit(d policy.Decision) time.Duration {
	if call, ok := d.Consult(); ok {
		return time.Duration(call.TotalMS)*time.Millisecond + consultMargin
	}
	return c.timeout(d.Tool())
}

// callArgs are the arguments the container gets: the model's, in their
// wire form, except for consult, whose container gets the request brokerd
// built and logged (the toolkit sends it unchanged and builds nothing).
func callArgs(d policy.Decision) ([]byte, error) {
	if call, ok := d.Consult(); ok {
		return call.ConsultCall.MarshalJSON()
	}
	if _, ok := d.MCP(); ok {
		return mcpArgs(d)
	}
	return d.Args().MarshalJSON()
}
