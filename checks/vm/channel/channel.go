// Package channel is the VM test host's command channel: the messages the
// test (package vm, on the host) and the guest's agent (checks/vm/agent)
// exchange over one virtio-serial port.
//
// # Protocol
//
// Frames are package frame's (a 4-byte big-endian length, then JSON
// decoded with package strict). When the agent opens the port it sends one
// [Response] with Ready set. After that the host sends one [Request] at a
// time and reads exactly one [Response] for it: "run" runs Argv as root
// with Stdin and answers the exit code and both outputs; "put" writes Data
// to Path (appending when Append is set, so a file of any size goes in
// chunks of at most [Chunk] bytes) with Mode.
//
// # Invariant
//
// Every frame on the port, in either direction, is at most [Max] bytes and
// decodes strictly into exactly one of the two types, so neither side can
// be made to allocate past the cap or act on a field it does not know.
// The guest is what the tests examine, not a trusted peer: the host checks
// every answer the same way the agent checks every request.
package channel

import (
	"fmt"
	"io"

	"wntrmute.dev/boxmaker/pkg/socket/frame"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// Max is the cap on one frame: the hard cap of package frame.
const Max = frame.HardMax

// Chunk is the most file data one "put" carries; its base64 encoding and
// envelope stay well under [Max].
const Chunk = 16 << 20

// OutputMax caps each of a command's outputs in the agent; more is cut and
// flagged in [Response.Truncated].
const OutputMax = 16 << 20

// Request is one command from the host.
type Request struct {
	Op        string   `json:"op"`                   // "run" or "put"
	Argv      []string `json:"argv,omitempty"`       // run: the program and its arguments
	Stdin     []byte   `json:"stdin,omitempty"`      // run: the whole standard input
	TimeoutMS int64    `json:"timeout_ms,omitempty"` // run: killed (the whole process group) after this
	Path      string   `json:"path,omitempty"`       // put: absolute path of the file
	Mode      uint32   `json:"mode,omitempty"`       // put: permission bits
	Data      []byte   `json:"data,omitempty"`       // put: the bytes to write
	Append    bool     `json:"append,omitempty"`     // put: append instead of truncating
}

// Response is the agent's answer to one [Request], or its first frame.
type Response struct {
	Ready     bool   `json:"ready,omitempty"`     // the agent's first frame, once per open
	Exit      int    `json:"exit"`                // run: the exit code, -1 if none (signal, timeout, start failure)
	Stdout    []byte `json:"stdout,omitempty"`    // run
	Stderr    []byte `json:"stderr,omitempty"`    // run
	Truncated bool   `json:"truncated,omitempty"` // run: an output was over OutputMax and was cut
	Error     string `json:"error,omitempty"`     // why there is no exit code, or why a put failed
}

// Send writes v (a [Request] or a [Response]) as one frame.
func Send(w io.Writer, v any) error {
	b, err := strict.Marshal(v)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return frame.Write(w, b, Max)
}

// Receive reads one frame into v (a *[Request] or a *[Response]).
func Receive(r io.Reader, v any) error {
	b, err := frame.Read(r, Max)
	if err != nil {
		return err
	}
	if err := strict.Unmarshal(b, v); err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	return nil
}
