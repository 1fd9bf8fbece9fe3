package rpc

import (
	"context"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Dial opens a conversation on socket s at path. Until it is closed, the
// end of ctx closes the connection (a read or write waiting then fails,
// with ctx's cause as the error's cause); s.Wait, if set, is the
// deadline of the whole conversation, which the caller may move with
// [Conn.SetDeadline].
func Dial(ctx context.Context, s *wire.Socket, path string) (*Conn, error) {
	uc, err := sockets.Dial(ctx, path)
	if err != nil {
		return nil, &Error{Socket: s.Name, Path: path, Peer: s.Server, Phase: Dialing, Err: err}
	}
	c := clientConn(s, uc)
	c.ctx = ctx
	c.stop = context.AfterFunc(ctx, func() { uc.Close() })
	if s.Wait > 0 {
		uc.SetDeadline(time.Now().Add(s.Wait))
	}
	return c, nil
}

// Exchange sends req and reads answers until a final one, which it
// returns. Each interim answer goes to interim, in order; an error from
// interim ends the exchange with that error, and with a nil interim an
// interim answer is [Unexpected]. A final [*wire.Error] is returned as the
// error (errors.As finds it), never as the answer.
func (c *Conn) Exchange(req strict.Variant, interim func(strict.Variant) error) (strict.Variant, error) {
	if err := c.Send(req); err != nil {
		return nil, err
	}
	for {
		v, err := c.Recv()
		if err != nil {
			return nil, err
		}
		if e, ok := v.(*wire.Error); ok {
			return nil, e
		}
		if c.s.Final(v) {
			return v, nil
		}
		if interim == nil {
			return nil, NotExpected(c.s, v)
		}
		if err := interim(v); err != nil {
			return nil, err
		}
	}
}

// Call is one exchange on a connection of its own: [Dial], [Conn.Exchange],
// Close.
func Call(ctx context.Context, s *wire.Socket, path string, req strict.Variant, interim func(strict.Variant) error) (strict.Variant, error) {
	c, err := Dial(ctx, s, path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Exchange(req, interim)
}

// Ask is a [Call] with no interim answers whose final answer must be a T;
// any other is [Unexpected].
func Ask[T strict.Variant](ctx context.Context, s *wire.Socket, path string, req strict.Variant) (T, error) {
	var zero T
	c, err := Dial(ctx, s, path)
	if err != nil {
		return zero, err
	}
	defer c.Close()
	return Expect[T](c, req, nil)
}

// Expect is [Conn.Exchange] wanting a final answer of type T: any other
// is [Unexpected].
func Expect[T strict.Variant](c *Conn, req strict.Variant, interim func(strict.Variant) error) (T, error) {
	var zero T
	v, err := c.Exchange(req, interim)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, NotExpected(c.s, v)
	}
	return t, nil
}

// NotExpected is the [Unexpected] error for answer v from s's server.
func NotExpected(s *wire.Socket, v strict.Variant) error {
	return &Error{Socket: s.Name, Peer: s.Server, Phase: Unexpected, Tag: v.Tag()}
}
