package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// DefaultTimeout is how long loopd waits for brokerd's first answer, and
// for its final one after an approval expires (broker.sock's own wait).
// Tool time limits sit under it (the shell tool defaults to 75 s, at most
// 75 s).
var DefaultTimeout = wire.Broker.Wait

// MaxApprovalWait bounds the wait for an owner's answer, whatever expiry
// brokerd names: a far expires must not park a turn for ever.
const MaxApprovalWait = 24 * time.Hour

// MaxConsultWait bounds the wait for a consult's answer after brokerd
// said it was sent, whatever expiry brokerd names (brokerd's own bound,
// total_timeout_s, is at most an hour).
const MaxConsultWait = time.Hour

// Client is the Port over brokerd's broker.sock: one connection per call.
type Client struct {
	Path    string        // broker.sock
	Timeout time.Duration // DefaultTimeout if 0
	Now     func() time.Time
}

var _ Port = (*Client)(nil)

func unavailable(why string) wire.ToolResult {
	return wire.ToolResult{Status: wire.StatusDenied, Label: dataclass.Label{Class: dataclass.Public},
		Output: "no tool can run: " + why + "; see docs/runbook.md#broker-unavailable"}
}

// errBadExpiry: brokerd named an expiry that is no time.
var errBadExpiry = errors.New("brokerd sent a bad expiry")

// Call implements Port. Its waits are deadlines on the whole exchange
// (first answer within Timeout; after a pending answer, until the approval
// expires plus Timeout), not per-read timeouts, so a trickling brokerd
// cannot hold a turn for ever.
func (c *Client) Call(ctx context.Context, r wire.ToolRequest, pending func(int64)) wire.ToolResult {
	timeout := cmp.Or(c.Timeout, DefaultTimeout)
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	conn, err := rpc.Dial(ctx, &wire.Broker, c.Path)
	if err != nil {
		return unavailable(err.Error())
	}
	defer conn.Close()
	conn.SetDeadline(now().Add(timeout))
	m, err := rpc.Expect[*wire.ToolResult](conn, &r, func(v strict.Variant) error {
		if m, ok := v.(*wire.ConsultPending); ok {
			// A consult runs for up to its total bound: the turn waits
			// that long (the slot is free meanwhile), and no longer.
			exp, err := time.Parse(time.RFC3339, m.Expires)
			if err != nil {
				return errBadExpiry
			}
			if limit := now().Add(MaxConsultWait); exp.After(limit) {
				exp = limit
			}
			conn.SetDeadline(exp.Add(timeout))
			return nil
		}
		m := v.(*wire.ToolPending) // the other interim answer
		exp, err := time.Parse(time.RFC3339, m.Expires)
		if err != nil {
			return errBadExpiry
		}
		if limit := now().Add(MaxApprovalWait); exp.After(limit) {
			exp = limit
		}
		conn.SetDeadline(exp.Add(timeout))
		pending(m.ID)
		return nil
	})
	var refused *wire.Error
	switch {
	case errors.As(err, &refused):
		return wire.ToolResult{Status: wire.StatusDenied, Label: dataclass.Label{Class: dataclass.Public}, Output: fmt.Sprintf("brokerd refused the call (%s): %s", refused.Kind, refused.Msg)}
	case err != nil:
		return unavailable(err.Error())
	}
	return answer(m)
}

// answer is brokerd's result as loopd keeps it: its status and labels as
// they came; a posted file only from a call that ran, and only under an
// id of the outbox's shape (loopd reads outbox/ by it).
func answer(m *wire.ToolResult) wire.ToolResult {
	r := *m
	r.Posted = nil
	if p := m.Posted; p != nil && m.Status == wire.StatusRan && wire.PostedIDPattern.MatchString(p.ID) {
		cp := *p
		r.Posted = &cp
	}
	return r
}
