// Package wire is the vocabulary of every socket between Boxmaker's roles:
// each socket as one [Socket] value (its file name, the messages each end
// reads, its frame cap and deadlines), all ten declared together in
// socket.go ([Sockets]); the messages themselves, one file per socket's
// vocabulary (loop.go, broker.go, gateway.go, memory.go, ...),
// whose JSON the golden files in testdata/ pin byte for byte; and the
// [Error] that crosses a socket, with its append-only [Kind]s. It holds
// no machinery: package rpc runs the one client call and the one server
// loop over these values. It imports nothing but the standard library,
// package strict and package dataclass, so every role can depend on it.
//
// Invariants:
//   - every socket's file name is written here and nowhere else (an
//     architecture check in checks/arch enforces it);
//   - a message's tag and JSON never change once shipped: a new field or
//     message is a new golden file;
//   - a privileged daemon never puts raw internal error text on the
//     wire. An [Error] carries the operation, a [Kind] and a message
//     written for the peer; the local cause stays in Err, which is never
//     encoded.
package wire

import (
	"fmt"
	"slices"
)

// Kind classifies an error that crosses a socket. The list is append-only:
// a kind once shipped keeps its name for ever, because logs and peers of
// other versions read it (a test pins the list).
type Kind string

// The kinds. Add new ones at the end of [Kinds] too.
const (
	Invalid     Kind = "invalid"     // the request was malformed or refused by the strict decoder
	Forbidden   Kind = "forbidden"   // this message is not accepted on this socket
	Denied      Kind = "denied"      // policy refused it
	Unavailable Kind = "unavailable" // a dependency is down or the daemon is in a fail-closed state
	TooLarge    Kind = "too_large"   // over a size cap
	Busy        Kind = "busy"        // over a concurrency cap; try again
	Internal    Kind = "internal"    // a bug or an I/O failure on our side
)

// Kinds lists every kind in the order they were added.
var Kinds = []Kind{Invalid, Forbidden, Denied, Unavailable, TooLarge, Busy, Internal}

// Error implements error so that errors.Is(err, wire.Forbidden) works on a
// *wire.Error of that kind.
func (k Kind) Error() string { return string(k) }

// UnmarshalText refuses kinds this version does not know: a peer must not
// be able to smuggle in an error class nobody handles.
func (k *Kind) UnmarshalText(b []byte) error {
	if !slices.Contains(Kinds, Kind(b)) {
		return fmt.Errorf("unknown error kind %q", b)
	}
	*k = Kind(b)
	return nil
}

// MarshalText writes the kind's name.
func (k Kind) MarshalText() ([]byte, error) {
	if !slices.Contains(Kinds, k) {
		return nil, fmt.Errorf("unknown error kind %q", string(k))
	}
	return []byte(k), nil
}

// Error is an error that crosses a socket.
type Error struct {
	Op   string `json:"op"`   // the operation, e.g. "tool_request"
	Kind Kind   `json:"kind"` // what went wrong, for code
	Msg  string `json:"msg"`  // what went wrong, for the owner; may end with a runbook pointer

	// Err is the local cause. It is never encoded, so internal detail
	// cannot leak to a peer.
	Err error `json:"-"`
}

// Tag makes Error a case of every socket's message union.
func (*Error) Tag() string { return "error" }

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Op + ": " + string(e.Kind)
	}
	return e.Op + ": " + string(e.Kind) + ": " + e.Msg
}

// Is reports whether target is this error's Kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// Unwrap returns the local cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error of kind k for operation op.
func Errorf(op string, k Kind, format string, args ...any) *Error {
	return &Error{Op: op, Kind: k, Msg: fmt.Sprintf(format, args...)}
}
