// Package memory is loopd's port to memoryd on memory.sock: the identity
// block for a new epoch's baseline, word that a turn has ended so
// memoryd can index it from the session log, and the identity entries'
// recall counts for the tiering job.
//
// Invariant: loopd never sends memory text to memoryd and never edits
// memory; it only asks for the block (checked by memoryd each time) and
// the counts, and names ended turns (a run's memory edits go, like every
// session's, as tool calls through brokerd). A block memoryd refuses is an error here, so no
// session starts without its identity.
package memory

import (
	"context"
	"errors"
	"fmt"

	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Client talks to memoryd's memory.sock, one connection per request.
type Client struct {
	Path string
}

// unavailable says what went wrong on memory.sock, and where to look.
func unavailable(err error) error {
	if errors.As(err, new(*wire.Error)) {
		return err // memoryd's own refusal, with its own pointer
	}
	return fmt.Errorf("%w; see docs/runbook.md#memoryd-unavailable", err)
}

// Identity returns the identity block for session's new epoch, telling
// memoryd the session's channel (its project).
func (c *Client) Identity(ctx context.Context, session, channel string, epoch int64) (string, error) {
	b, err := rpc.Ask[*wire.IdentityBlock](ctx, &wire.Memory, c.Path, &wire.IdentityRequest{Session: session, Epoch: epoch, Channel: channel})
	if err != nil {
		return "", unavailable(err)
	}
	return b.Text, nil
}

// TurnDone tells memoryd that turn of session's epoch has ended.
func (c *Client) TurnDone(ctx context.Context, session string, epoch, turn int64) error {
	_, err := rpc.Ask[*wire.TurnIndexed](ctx, &wire.Memory, c.Path, &wire.TurnDone{Session: session, Epoch: epoch, Turn: turn})
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// Tiering asks for the identity entries' recall counts, for the
// built-in tiering job's run in session.
func (c *Client) Tiering(ctx context.Context, session string) (*wire.TieringStats, error) {
	st, err := rpc.Ask[*wire.TieringStats](ctx, &wire.Memory, c.Path, &wire.TieringRequest{Session: session})
	if err != nil {
		return nil, unavailable(err)
	}
	return st, nil
}
