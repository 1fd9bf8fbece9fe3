package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// DefaultGateWait bounds one gate query: a turn waits no longer than
// this on brokerd; unanswered, it is deferred until brokerd answers,
// and then filed untrusted (late), never trusted.
const DefaultGateWait = 2 * time.Second

// Gate asks brokerd's gate.sock for a session's state.
type Gate struct {
	Socket string // brokerd's gate.sock; "" : no gate, every answer fails
	// Listeners are the uids brokerd's listener may run as
	// (SO_PEERCRED of the dialled socket): an answer from anyone else
	// is never read, so no other process can forge "clean".
	Listeners []uint32
	Wait      time.Duration
}

// State is a session's state as brokerd holds it.
type State struct {
	Taint     dataclass.Class
	Untrusted bool
}

// GateError is a gate query that gave no usable answer.
type GateError struct {
	Session string
	Why     string
}

func (e *GateError) Error() string {
	return fmt.Sprintf("gate query for session %s: %s; see docs/runbook.md#fleet-gate-unanswered", e.Session, e.Why)
}

// Ask asks brokerd for session's state within g.Wait.
func (g *Gate) Ask(ctx context.Context, session string) (State, error) {
	fail := func(format string, a ...any) (State, error) {
		return State{}, &GateError{Session: session, Why: fmt.Sprintf(format, a...)}
	}
	if g.Socket == "" {
		return fail("memoryd has no gate.sock to ask")
	}
	wait := g.Wait
	if wait <= 0 {
		wait = DefaultGateWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	c, err := rpc.Dial(ctx, &wire.Gate, g.Socket)
	if err != nil {
		return fail("%v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	// Who listens on the path is checked before anything is sent: a
	// process that bound it first must not be the one that says clean.
	peer, err := c.Peer()
	if err != nil {
		return fail("the listener's credentials could not be read (%v)", err)
	}
	if !slices.Contains(g.Listeners, peer.UID()) {
		return fail("the listener on %s runs as uid %d, not brokerd's (%v); see docs/runbook.md#fleet-gate-peer", g.Socket, peer.UID(), g.Listeners)
	}
	st, err := rpc.Expect[*wire.SessionState](c, &wire.SessionQuery{Session: session}, nil)
	if err != nil {
		return fail("%v", err)
	}
	if st.Session != session || !st.Taint.Valid() {
		return fail("brokerd answered for another session or with no valid taint")
	}
	return State{Taint: st.Taint, Untrusted: st.Untrusted}, nil
}

// Filing is where a finished turn goes.
type Filing string

// The filings.
const (
	Trusted   Filing = "trusted"   // the agent's trusted workspace
	Untrusted Filing = "untrusted" // the agent's untrusted workspace
	Withheld  Filing = "withheld"  // not written at all (above the class, or secret)
)

// File decides a turn's filing from brokerd's answer (gate), whether
// that answer came late (late: an earlier query for the turn went
// unanswered within the gate's wait, so the turn was deferred), loopd's
// labels in the session log (log) and the highest class written (max,
// never secret). There is always an answer of brokerd's: a turn brokerd
// has not answered for is deferred, never filed by loopd's labels alone
// (a stale or lying log could otherwise send a turn brokerd holds as
// secret to a workspace). The rule (P23):
//   - a secret turn never leaves the host, and one above max is not
//     written, by the higher of the two classes;
//   - trusted only if brokerd answered in time, says clean, and the log
//     agrees; a late answer, or any disagreement, is untrusted.
//
// The reason says why, for the outbox's record.
func File(gate State, late bool, log State, max dataclass.Class) (Filing, string) {
	class := dataclass.Join(log.Taint, gate.Taint)
	switch {
	case class == dataclass.Secret:
		return Withheld, "secret: never leaves the host"
	case !class.AtMost(max):
		return Withheld, fmt.Sprintf("class %s is above the configured %s", class, max)
	case late:
		return Untrusted, "brokerd answered only after the gate's wait"
	case gate.Untrusted && log.Untrusted:
		return Untrusted, "the session read untrusted content"
	case gate.Untrusted != log.Untrusted:
		return Untrusted, fmt.Sprintf("brokerd (untrusted=%t) and the session log (untrusted=%t) disagree", gate.Untrusted, log.Untrusted)
	}
	return Trusted, "clean"
}
