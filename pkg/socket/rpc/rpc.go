// Package rpc is the one way Boxmaker's roles talk on a socket: one
// client call and one server loop, run over a socket's [wire.Socket]
// value, as every Upspin client goes through rpc.Client.Invoke.
//
// # Protocol
//
// A conversation is a sequence of frames (package frame), each one strict
// JSON message (package strict) of the socket's unions. A client sends a
// request and reads answers until a final one ([wire.Socket.Final]); the
// interim ones (loop.sock's turn events, broker.sock's tool_pending) go to
// a callback. A [*wire.Error] as the final answer becomes the call's
// error. A server reads a request, refuses one that does not decode
// (invalid, or too_large over the cap) or that this socket does not take
// (forbidden: a sibling socket's message, or one of no union at all),
// passes the rest to the route for its type, and reads the next one
// unless the socket takes one request per connection. A long-lived
// conversation (gateway.sock, where the server later asks the client)
// uses the same [Conn] both ways.
//
// # Invariants
//
//   - no other package reads or writes a frame (an architecture check in
//     checks/arch enforces it; the VM test channel, checks/vm/channel,
//     is exempt, being no socket between roles): every frame is capped by
//     its socket, strictly decoded, and every refusal has one shape;
//   - a route is registered for one message type of the socket's request
//     union; registering a tag twice, or one the socket cannot decode,
//     panics at start-up;
//   - a refused message is logged with the peer's uid and pid and
//     answered with a [wire.Error] that carries no internal detail, and the
//     connection ends.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/frame"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Phase is where a conversation failed.
type Phase string

// The phases.
const (
	Dialing    Phase = "dial"       // the socket could not be reached
	Sending    Phase = "send"       // a frame could not be written
	Receiving  Phase = "receive"    // no frame came (end of stream, deadline, over the cap)
	Decoding   Phase = "decode"     // a frame came that is not one of the socket's messages
	Unexpected Phase = "unexpected" // a message came that the exchange does not expect here
)

// Error is a conversation that failed on our side of the wire or in
// transit; a peer's own refusal is a [*wire.Error] instead. Its text says
// what happened in terms of the role at the other end, for the owner.
type Error struct {
	Socket string // the socket's file name
	Path   string // where it was dialled, for Dialing
	Peer   string // the role at the other end
	Phase  Phase
	Tag    string // the message sent or, for Unexpected, received
	Err    error  // the cause; nil for Unexpected
}

func (e *Error) Error() string {
	switch e.Phase {
	case Dialing:
		if errors.Is(e.Err, fs.ErrNotExist) || errors.Is(e.Err, syscall.ECONNREFUSED) {
			return fmt.Sprintf("%s is not running (nothing listens on %s)", e.Peer, e.Path)
		}
		return fmt.Sprintf("%s is not reachable (%v)", e.Peer, e.Err)
	case Sending:
		return fmt.Sprintf("%s could not be sent to %s (%v)", e.Tag, e.Peer, e.Err)
	case Receiving:
		if errors.Is(e.Err, io.EOF) {
			return fmt.Sprintf("%s closed the connection before it answered", e.Peer)
		}
		return fmt.Sprintf("%s did not answer (%v)", e.Peer, e.Err)
	case Decoding:
		return fmt.Sprintf("%s broke the protocol (%v)", e.Peer, e.Err)
	}
	return fmt.Sprintf("%s sent %s on %s", e.Peer, e.Tag, e.Socket)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Failed reports whether err is a conversation that failed in phase p.
func Failed(err error, p Phase) bool {
	var e *Error
	return errors.As(err, &e) && e.Phase == p
}

// Conn is one end of a conversation on a socket. A client's comes from
// [Dial]; a server's is handed to its routes by [Server.Serve]. A Conn is
// used by one goroutine at a time, except [Conn.Gone] and Close.
type Conn struct {
	s    *wire.Socket
	c    net.Conn
	peer string                        // the role at the other end, for errors
	out  *strict.Union[strict.Variant] // what this end writes
	in   *strict.Union[strict.Variant] // what this end reads
	ctx  context.Context               // a client's: its end closes the connection
	stop func() bool                   // releases the context's hook
}

func clientConn(s *wire.Socket, c net.Conn) *Conn {
	return &Conn{s: s, c: c, peer: s.Server, out: s.Requests, in: s.Answers, ctx: context.Background(), stop: func() bool { return false }}
}

// Accept makes the server's end of a conversation on an accepted
// connection without the server loop: for a test double that plays a
// server by hand (it must see what a client sends, however wrong).
// Product servers use [Server].
func Accept(s *wire.Socket, c net.Conn) *Conn { return serverConn(s, c) }

func serverConn(s *wire.Socket, c net.Conn) *Conn {
	return &Conn{s: s, c: c, peer: "the client", out: s.Answers, in: s.Requests, ctx: context.Background(), stop: func() bool { return false }}
}

func (c *Conn) fail(p Phase, tag string, err error) error {
	if c.ctx.Err() != nil {
		err = context.Cause(c.ctx)
	}
	return &Error{Socket: c.s.Name, Peer: c.peer, Phase: p, Tag: tag, Err: err}
}

// Send writes v as one frame.
func (c *Conn) Send(v strict.Variant) error {
	b, err := c.out.Encode(v)
	if err == nil {
		err = frame.Write(c.c, b, c.s.FrameMax)
	}
	if err != nil {
		return c.fail(Sending, v.Tag(), err)
	}
	return nil
}

// Recv reads one frame and decodes it strictly. A clean end of stream
// before a frame is an [*Error] that matches io.EOF.
func (c *Conn) Recv() (strict.Variant, error) {
	b, err := frame.Read(c.c, c.s.FrameMax)
	if err != nil {
		return nil, c.fail(Receiving, "", err)
	}
	v, err := c.in.Decode(b)
	if err != nil {
		return nil, c.fail(Decoding, "", err)
	}
	return v, nil
}

// SetDeadline bounds every read and write from now on (the zero time
// lifts it).
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// Gone returns a channel closed when the peer closes its end, or sends
// anything at all: for a server whose route waits (for the owner, say)
// while the client may send nothing more, so that the client going away
// withdraws what it asked for.
func (c *Conn) Gone() <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		var one [1]byte
		c.c.Read(one[:])
	}()
	return gone
}

// Peer is the credentials of the process at the other end, for a client
// that must check who it reached before it says anything.
func (c *Conn) Peer() (sockets.Peer, error) {
	uc, ok := c.c.(*net.UnixConn)
	if !ok {
		return sockets.Peer{}, fmt.Errorf("peer of %s: not a Unix socket", c.s.Name)
	}
	return sockets.PeerOf(uc)
}

// Close ends the conversation.
func (c *Conn) Close() error {
	c.stop()
	return c.c.Close()
}
