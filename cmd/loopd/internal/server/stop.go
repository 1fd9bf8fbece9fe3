package server

import (
	"context"
	"errors"
	"sync"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// turnStop lets a client stop a session's running turn ([wire.Stop],
// gatewayd's !stop). The turn's context is cancelled: a model call is
// abandoned, a tool call's connection to brokerd closes (which withdraws
// a pending approval); the turn is then closed on disk as interrupted
// (its calls without results marked so, never re-run) and its followers
// get [wire.Stopped]. Messages queued for the next turn still go.
//
// Its fields are guarded by the live session's mu.
type turnStop struct {
	cancel    context.CancelFunc // nil when no turn runs
	requested bool
}

// begin gives the running turn its own context.
func (s *turnStop) begin(mu *sync.Mutex, parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	mu.Lock()
	s.cancel, s.requested = cancel, false
	mu.Unlock()
	return ctx
}

// end reports whether the turn that just returned was stopped.
func (s *turnStop) end(mu *sync.Mutex) bool {
	mu.Lock()
	defer mu.Unlock()
	s.cancel()
	stopped := s.requested
	s.cancel, s.requested = nil, false
	return stopped
}

// Stop stops session id's running turn, if any.
func (m *Manager) Stop(id string) *wire.StopDone {
	if wire.CheckSessionID(id) != nil {
		return &wire.StopDone{Session: id}
	}
	m.mu.Lock()
	l := m.sessions[id]
	m.mu.Unlock()
	if l == nil {
		return &wire.StopDone{Session: id}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.running || l.stop.cancel == nil {
		return &wire.StopDone{Session: id}
	}
	l.stop.requested = true
	l.stop.cancel()
	m.Log.Info("turn stopped by a client", "session", id, "turn", l.turn)
	return &wire.StopDone{Session: id, Stopped: true}
}

// stopped closes a stopped turn on disk and tells its followers: its
// calls without results are marked interrupted (never re-run), then a
// Stopped and a TurnEnd record close it, whether or not the model had
// been asked yet (so the stopped message does not join the next turn).
func (m *Manager) stopped(l *live, t int64, emit func(strict.Variant)) error {
	return m.closeTurn(l, t, "the turn was stopped on request",
		"the turn was stopped before the result came; the call may or may not have run", emit)
}

// failed closes, the same way, a turn that failed in this loopd (the
// model's stream broke: inferproxy or llama-server died), so that it ends
// with its cause as its outcome, posted once, instead of staying open
// until a later message or start closes it as loopd's own stop. A turn
// already closed is left alone (the error is then the caller's to send).
func (m *Manager) failed(l *live, t int64, cause error, emit func(strict.Variant)) error {
	st := session.StateOf(l.s.Records())
	if st.Interrupted != t && st.Waiting != t {
		return errors.New("the turn is not open")
	}
	return m.closeTurn(l, t, "the turn failed: "+cause.Error(),
		"the turn failed before the result came; the call may or may not have run", emit)
}

func (m *Manager) closeTurn(l *live, t int64, msg, result string, emit func(strict.Variant)) error {
	st := session.StateOf(l.s.Records())
	var errs []error
	if st.Interrupted == t {
		for _, c := range st.Pending {
			errs = append(errs, l.s.Append(&sessionlog.ToolResult{Turn: t, CallID: c.ID, Tool: c.Function.Name, Status: wire.StatusInterrupted,
				Content: result, Label: dataclass.Label{Class: dataclass.Public}}))
		}
	}
	errs = append(errs,
		l.s.Append(&sessionlog.Stopped{Turn: t, Reason: wire.StopInterrupted, Msg: msg}),
		l.s.Append(&sessionlog.TurnEnd{Turn: t}))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The owner hears first; memoryd indexes the closed turn too, after.
	emit(&wire.Stopped{Session: l.s.ID, Turn: t, Reason: wire.StopInterrupted, Msg: msg})
	if m.Engine != nil && m.Engine.Ended != nil {
		m.Engine.Ended(l.s, t)
	}
	return nil
}
