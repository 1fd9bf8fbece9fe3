// Package runner runs an allowed tool call. It is the only code that will
// drive tool containers (Podman, with the next issue); until then
// [Refusing] is the only Runner.
//
// Invariant: a Runner runs nothing without a valid [policy.Decision], which
// only brokerd's policy can make; the zero value is refused. A failure's
// text is fixed text, never tool output, so a failed run carries nothing
// from the call back into the conversation.
package runner

import (
	"context"
	"errors"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
)

// Output is what a tool printed and how it exited.
type Output struct {
	Stdout string
	Exit   int
}

// Runner runs one allowed call.
type Runner interface {
	Run(ctx context.Context, d policy.Decision) (Output, error)
}

// ErrNoDecision is returned for the zero Decision.
var ErrNoDecision = errors.New("run: no decision: nothing runs without one")

// ErrUnavailable is Refusing's answer to every valid decision.
var ErrUnavailable = errors.New("tool containers are not available in this version of brokerd; see docs/runbook.md#runner-unavailable")

// Refusing runs nothing.
type Refusing struct{}

// Run implements Runner.
func (Refusing) Run(_ context.Context, d policy.Decision) (Output, error) {
	if !d.Valid() {
		return Output{}, ErrNoDecision
	}
	return Output{}, ErrUnavailable
}
