// Package memory is loopd's port to memoryd on memory.sock: the identity
// block for a new epoch's baseline, and word that a turn has ended so
// memoryd can index it from the session log.
//
// Invariant: loopd never sends memory text to memoryd and never edits
// memory; it only asks for the block (checked by memoryd each time) and
// names ended turns. A block memoryd refuses is an error here, so no
// session starts without its identity.
package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/pkg/frame"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// Timeout bounds one exchange with memoryd.
const Timeout = 10 * time.Second

// Client talks to memoryd's memory.sock, one connection per request.
type Client struct {
	Path string
}

func (c *Client) ask(ctx context.Context, v strict.Variant) (strict.Variant, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	conn, err := sockets.Dial(ctx, c.Path)
	if err != nil {
		return nil, fmt.Errorf("memoryd is not reachable at %s: %v; see docs/runbook.md#memoryd-unavailable", c.Path, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(Timeout))
	b, err := wire.MemorydMessages.Encode(v)
	if err == nil {
		err = frame.Write(conn, b, wire.MemoryFrameMax)
	}
	if err != nil {
		return nil, fmt.Errorf("memoryd: send %s: %v; see docs/runbook.md#memoryd-unavailable", v.Tag(), err)
	}
	body, err := frame.Read(conn, wire.MemoryFrameMax)
	if err != nil {
		return nil, fmt.Errorf("memoryd did not answer %s: %v; see docs/runbook.md#memoryd-unavailable", v.Tag(), err)
	}
	r, err := wire.MemorydMessages.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("memoryd broke the protocol: %v; see docs/runbook.md#memoryd-unavailable", err)
	}
	if e, ok := r.(*wire.Error); ok {
		return nil, e
	}
	return r, nil
}

// Identity returns the identity block for session's new epoch.
func (c *Client) Identity(ctx context.Context, session string, epoch int64) (string, error) {
	r, err := c.ask(ctx, &wire.IdentityRequest{Session: session, Epoch: epoch})
	if err != nil {
		return "", err
	}
	b, ok := r.(*wire.IdentityBlock)
	if !ok {
		return "", errors.New("memoryd answered an identity request with " + r.Tag() + "; see docs/runbook.md#memoryd-unavailable")
	}
	return b.Text, nil
}

// TurnDone tells memoryd that turn of session's epoch has ended.
func (c *Client) TurnDone(ctx context.Context, session string, epoch, turn int64) error {
	r, err := c.ask(ctx, &wire.TurnDone{Session: session, Epoch: epoch, Turn: turn})
	if err != nil {
		return err
	}
	if _, ok := r.(*wire.TurnIndexed); !ok {
		return errors.New("memoryd answered turn_done with " + r.Tag())
	}
	return nil
}
