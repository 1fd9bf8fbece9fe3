// Package runner runs an allowed tool call in a fresh Podman container
// that holds only what that one call was granted, and then removes it. It
// is the only code in the repository that imports Podman's bindings.
//
// Invariants:
//   - a Runner runs nothing without a valid [policy.Decision], which only
//     brokerd's policy can make; the zero value is refused;
//   - one call is one container (two for a call granted hosts: the egress
//     proxy's and the tool's), created for the call from the image named
//     by ID, never pulled, and attached on a socket of its own; every
//     container it creates is killed and force-removed on every path out
//     of Run, before Run returns, except a tool container whose exit Run
//     observed, which nothing runs in any more and which is removed just
//     after the answer (its writable mount's lock held until it is gone;
//     [Podman.Settle] waits for it); every one carries brokerd's label so
//     that [Podman.Sweep] removes what a crash left behind;
//   - the container gets no network (only through the egress proxy, for
//     a grant's hosts), a read-only root, no capabilities, no new
//     privileges, a seccomp profile that refuses every new or entered
//     namespace (toolProfile), user 65534, pids and memory limits, a time limit, only
//     the Decision's mounts at the same path (read-only unless writable),
//     and only the Decision's secret, on stdin;
//   - no mount holds or lies inside brokerd's own files and sockets,
//     Podman's socket directory, the runtime directory, /proc, /sys, /dev
//     or /run (see protectedPaths);
//   - a call with a writable mount runs alone (mountLock), and a started
//     container whose mount paths are not, by device and inode, the ones
//     checked gets no input and is removed (checkPins);
//   - anything short of that fails the call closed: a warning from
//     container creation (Podman drops limits with only a warning on some
//     hosts) or a created container whose inspected limits differ from
//     the ones asked for is refused, removed and never started;
//   - stdout and stderr are captured separately and capped, and a call
//     that prints past the cap is stopped, so no tool can grow brokerd's
//     memory; an output stream that breaks its frame format (stream.go)
//     fails the call, so cut output never passes for the whole;
//   - an error's text is fixed text, never tool output, so a failed run
//     carries nothing from the call back into the conversation.
package runner

import (
	"context"
	"errors"
	"strings"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
)

// Output is what a tool printed and how it exited.
type Output struct {
	Stdout string
	Stderr string
	Exit   int
	// Stopped says why the runner stopped the tool before it exited on
	// its own ("" if it did not): StopTime (followed by " of N s"),
	// StopOutput or StopMemory.
	Stopped string
}

// Why a tool was stopped.
const (
	StopTime   = "it ran past its time limit"
	StopOutput = "it printed more than the output cap"
	StopMemory = "it ran out of its memory limit"
)

// Runner runs one allowed call.
type Runner interface {
	Run(ctx context.Context, d policy.Decision) (Output, error)
}

// ErrNoDecision is returned for the zero Decision.
var ErrNoDecision = errors.New("run: no decision: nothing runs without one")

// ErrUnavailable is Refusing's answer to every valid decision.
var ErrUnavailable = errors.New("tool containers are not configured in this brokerd ([runner] in brokerd.toml); see docs/runbook.md#runner-unavailable")

// Refusing runs nothing: brokerd uses it when brokerd.toml has no
// [runner] table.
type Refusing struct{}

// Run implements Runner.
func (Refusing) Run(_ context.Context, d policy.Decision) (Output, error) {
	if !d.Valid() {
		return Output{}, ErrNoDecision
	}
	return Output{}, ErrUnavailable
}

// failure is one of the runner's errors with the detail of this
// occurrence, placed before the runbook pointer so the text still ends
// with it. errors.Is finds the kind.
type failure struct {
	kind error
	msg  string
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.kind }

// fail adds detail to kind, whose text ends with "; see docs/runbook.md#...".
func fail(kind error, detail string) error {
	msg := kind.Error()
	i := strings.LastIndex(msg, "; see ")
	if i < 0 {
		return &failure{kind, msg + " (" + detail + ")"}
	}
	return &failure{kind, msg[:i] + " (" + detail + ")" + msg[i:]}
}
