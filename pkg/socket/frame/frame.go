// Package frame is the framing of every Unix-socket conversation between
// Boxmaker's roles.
//
// # Protocol
//
// A frame is a 4-byte big-endian length n followed by n bytes of JSON (one
// value, decoded with package strict). A connection is a sequence of
// frames in each direction; which messages flow is each socket's own
// protocol, documented where that socket is served.
//
// # Invariant
//
// [Read] checks n against the caller's cap before it allocates or reads a
// single byte of the body, so a peer cannot make the reader allocate more
// than the cap. A zero-length frame is refused (it cannot be JSON). Each
// socket has its own cap; [DefaultMax] is the default.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMax is the cap for sockets that do not set their own: large enough
// for a capped tool result plus its envelope, small enough that a hostile
// peer cannot exhaust memory with a few connections.
const DefaultMax = 1 << 20

// HardMax bounds every cap, whatever a config asks for.
const HardMax = 64 << 20

// ErrTooLarge is returned (wrapped in a [*SizeError]) when a frame's
// declared length is over the cap.
var ErrTooLarge = errors.New("frame too large")

// ErrEmpty is returned for a frame of length zero.
var ErrEmpty = errors.New("empty frame")

// SizeError reports a frame over the cap, before any of it was read.
type SizeError struct {
	Size, Max uint64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("frame of %d bytes is over the cap of %d", e.Size, e.Max)
}

func (e *SizeError) Unwrap() error { return ErrTooLarge }

func checkMax(max int) error {
	if max <= 0 || max > HardMax {
		return fmt.Errorf("frame cap %d is outside 1..%d", max, HardMax)
	}
	return nil
}

// Read reads one frame body of at most max bytes. A clean end of stream
// before the header is io.EOF; a stream that ends inside a frame is
// io.ErrUnexpectedEOF.
func Read(r io.Reader, max int) ([]byte, error) {
	if err := checkMax(max); err != nil {
		return nil, fmt.Errorf("read frame: %w", err)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("read frame header: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return nil, fmt.Errorf("read frame: %w", ErrEmpty)
	}
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("read frame: %w", &SizeError{Size: uint64(n), Max: uint64(max)})
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read frame body: %w", err)
	}
	return body, nil
}

// Write writes body as one frame, refusing one over max so that a sender
// learns of the cap before its peer has to refuse it. Header and body go
// out in a single Write so that a frame is never interleaved on a shared
// writer.
func Write(w io.Writer, body []byte, max int) error {
	if err := checkMax(max); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	if len(body) == 0 {
		return fmt.Errorf("write frame: %w", ErrEmpty)
	}
	if len(body) > max {
		return fmt.Errorf("write frame: %w", &SizeError{Size: uint64(len(body)), Max: uint64(max)})
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}
