package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"wntrmute.dev/boxmaker/pkg/socket/frame"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Route serves one message type of a socket. Make one with [On] or
// [Stream].
type Route struct {
	tag   string
	serve func(ctx context.Context, peer sockets.Peer, c *Conn, req strict.Variant) error
}

// On routes requests of type T to h, whose return value is the one
// answer.
func On[T strict.Variant](h func(ctx context.Context, peer sockets.Peer, req T) strict.Variant) Route {
	var zero T // Tag has a pointer receiver that reads nothing: a nil T answers it
	return Route{tag: zero.Tag(), serve: func(ctx context.Context, peer sockets.Peer, c *Conn, req strict.Variant) error {
		return c.Send(h(ctx, peer, req.(T)))
	}}
}

// Stream routes requests of type T to h, which writes its answers itself
// on c (interim ones, then the final one) and may go on talking on it; an
// error from h ends the connection.
func Stream[T strict.Variant](h func(ctx context.Context, peer sockets.Peer, c *Conn, req T) error) Route {
	var zero T
	return Route{tag: zero.Tag(), serve: func(ctx context.Context, peer sockets.Peer, c *Conn, req strict.Variant) error {
		return h(ctx, peer, c, req.(T))
	}}
}

// Server is the one server loop of a socket: its routing table is the
// list of messages the socket takes; everything else is refused.
type Server struct {
	s      *wire.Socket
	log    *slog.Logger
	routes map[string]Route
}

// NewServer makes socket s's server. It panics if two routes share a
// message type or a route's type is not in s's request union: both are
// programming errors, found at start-up.
func NewServer(s *wire.Socket, log *slog.Logger, routes ...Route) *Server {
	srv := &Server{s: s, log: log.With("socket", s.Name), routes: map[string]Route{}}
	for _, r := range routes {
		if _, dup := srv.routes[r.tag]; dup {
			panic(fmt.Sprintf("rpc: %s: two routes for %q", s.Name, r.tag))
		}
		if _, ok := s.Requests.New(r.tag); !ok {
			panic(fmt.Sprintf("rpc: %s: route for %q, which the socket cannot decode", s.Name, r.tag))
		}
		srv.routes[r.tag] = r
	}
	return srv
}

// Socket is the socket the server serves.
func (srv *Server) Socket() *wire.Socket { return srv.s }

// Listen listens on s in cfg.Dir, with s's name and idle deadline (cfg
// gives the rest: who may connect, how many at once).
func Listen(s *wire.Socket, cfg sockets.Config) (*sockets.Listener, error) {
	cfg.Name = s.Name
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = s.Idle
	}
	return sockets.Listen(cfg)
}

// Serve is a [sockets.Handler]: it serves one connection until the peer
// closes it, a request is refused, a route ends it, or (for a socket of
// one request per connection) the first request has been served.
func (srv *Server) Serve(ctx context.Context, peer sockets.Peer, nc net.Conn) {
	c := serverConn(srv.s, nc)
	for {
		v, err := c.Recv()
		if err != nil {
			// A peer that hung up, or went quiet past the idle deadline,
			// hears nothing more; one that sent something wrong is told.
			gone := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrDeadlineExceeded)
			if !gone && ctx.Err() == nil {
				srv.refuse(c, peer, err)
			}
			return
		}
		r, ok := srv.routes[v.Tag()]
		if !ok {
			srv.forbidden(c, peer, v.Tag(), v.Tag()+" is not accepted on "+srv.s.Name)
			return
		}
		if err := r.serve(ctx, peer, c, v); err != nil {
			if ctx.Err() == nil {
				srv.log.Warn("conversation ended", "message", v.Tag(), "uid", peer.UID(), "err", err.Error())
			}
			return
		}
		if srv.s.OnePerConn {
			return
		}
	}
}

// forbidden refuses a message this socket does not take, and logs it: a
// peer that sends one is either broken or trying to reach authority it
// was not given.
func (srv *Server) forbidden(c *Conn, peer sockets.Peer, op, msg string) {
	srv.log.Warn("message refused: not accepted on this socket; see docs/runbook.md#socket-forbidden",
		"message", op, "uid", peer.UID(), "pid", peer.PID())
	c.Send(&wire.Error{Op: op, Kind: wire.Forbidden, Msg: msg})
}

// refuse answers a frame that could not be read or decoded. A message of
// no union the socket knows is another protocol's: forbidden.
func (srv *Server) refuse(c *Conn, peer sockets.Peer, err error) {
	cause := errors.Unwrap(err)
	switch {
	case errors.Is(err, strict.ErrUnknownType):
		srv.forbidden(c, peer, srv.s.Name, "the message is not accepted on "+srv.s.Name+": "+cause.Error())
		return
	case errors.Is(err, frame.ErrTooLarge):
		c.Send(&wire.Error{Op: srv.s.Name, Kind: wire.TooLarge, Msg: "the message is over " + srv.s.Name + "'s cap: " + cause.Error()})
	default:
		c.Send(&wire.Error{Op: srv.s.Name, Kind: wire.Invalid, Msg: "the message did not decode: " + cause.Error()})
	}
	srv.log.Warn("message refused: it did not decode", "uid", peer.UID(), "pid", peer.PID(), "err", cause.Error())
}
