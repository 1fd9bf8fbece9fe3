package broker

import (
	"context"
	"fmt"
	"net"
	"time"

	"wntrmute.dev/boxmaker/pkg/dataclass"
	"wntrmute.dev/boxmaker/pkg/frame"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// DefaultTimeout is how long loopd waits for brokerd's first answer, and
// for its final one after an approval expires. Tool time limits sit under
// it (the shell tool defaults to 75 s, at most 75 s).
const DefaultTimeout = 120 * time.Second

// MaxApprovalWait bounds the wait for an owner's answer, whatever expiry
// brokerd names: a far expires must not park a turn for ever.
const MaxApprovalWait = 24 * time.Hour

// Client is the Port over brokerd's broker.sock: one connection per call.
type Client struct {
	Path    string        // broker.sock
	Timeout time.Duration // DefaultTimeout if 0
	Now     func() time.Time
}

var _ Port = (*Client)(nil)

func unavailable(why string) Outcome {
	return Outcome{Status: Denied, Class: dataclass.Public,
		Output: "no tool can run: " + why + "; see docs/runbook.md#broker-unavailable"}
}

// Call implements Port. Its waits are deadlines on the whole exchange
// (first answer within Timeout; after a pending answer, until the approval
// expires plus Timeout), not per-read timeouts, so a trickling brokerd
// cannot hold a turn for ever.
func (c *Client) Call(ctx context.Context, r Request, pending func(int64)) Outcome {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	conn, err := sockets.Dial(ctx, c.Path)
	if err != nil {
		return unavailable("loopd cannot reach brokerd (" + err.Error() + ")")
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req, err := wire.BrokerMessages.Encode(&wire.ToolRequest{Session: r.Session, CallID: r.CallID, Tool: r.Tool, Arguments: r.Arguments})
	if err == nil {
		conn.SetDeadline(now().Add(timeout))
		err = frame.Write(conn, req, wire.BrokerFrameMax)
	}
	if err != nil {
		return unavailable("the request could not be sent to brokerd (" + err.Error() + ")")
	}
	for {
		v, err := read(conn)
		if err != nil {
			return unavailable("brokerd did not answer (" + err.Error() + ")")
		}
		switch m := v.(type) {
		case *wire.ToolPending:
			exp, err := time.Parse(time.RFC3339, m.Expires)
			if err != nil {
				return unavailable("brokerd sent a bad expiry")
			}
			if limit := now().Add(MaxApprovalWait); exp.After(limit) {
				exp = limit
			}
			conn.SetDeadline(exp.Add(timeout))
			pending(m.ID)
		case *wire.ToolResult:
			return outcome(m)
		case *wire.Error:
			return Outcome{Status: Denied, Class: dataclass.Public, Output: fmt.Sprintf("brokerd refused the call (%s): %s", m.Kind, m.Msg)}
		default:
			return unavailable(fmt.Sprintf("brokerd sent %s on broker.sock", v.Tag()))
		}
	}
}

func read(c net.Conn) (interface{ Tag() string }, error) {
	b, err := frame.Read(c, wire.BrokerFrameMax)
	if err != nil {
		return nil, err
	}
	return wire.BrokerMessages.Decode(b)
}

func outcome(m *wire.ToolResult) Outcome {
	o := Outcome{Output: m.Output, Class: m.Class, Untrusted: m.Untrusted}
	switch m.Status {
	case wire.StatusRan:
		o.Status = Ran
	case wire.StatusFailed:
		o.Status = Failed
	default:
		o.Status = Denied
	}
	return o
}
