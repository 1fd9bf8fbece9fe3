package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/epoch"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// # When the epoch changes
//
// Only when no turn runs in the session (so no approval is pending: an
// approval waits inside a turn), and only when its epoch has a turn that
// ended in it (a fresh epoch has nothing to summarise, so a session can
// never loop). Three triggers:
//   - idle: no turn for Policy.IdleAfter, and the context after the last
//     completion over Policy.CompactAt percent of the slot (or the epoch
//     ended full); at most one try per idle period;
//   - the owner's bxctl compact ([wire.Compact]);
//   - a turn about to start that would not fit (the epoch ended full, or
//     the last context plus max_tokens is over the slot): the epoch
//     changes first and the turn runs in the new one.
//
// While a change runs the session counts as running: a message that
// arrives is logged (for a later turn than the summary covers), waits,
// and becomes the new epoch's first turn.

// Policy is when the idle trigger fires.
type Policy struct {
	IdleAfter time.Duration // 0: never at idle (bxctl compact and a full context still change it)
	CompactAt int           // percent of the slot's context
}

// stopIdle stops the idle timer. l.mu is held.
func (l *live) stopIdle() {
	if l.idle != nil {
		l.idle.Stop()
		l.idle = nil
	}
}

// armIdle starts the idle period after a turn. l.mu is held.
func (m *Manager) armIdle(l *live) {
	l.stopIdle()
	if m.Epoch == nil || m.Policy.IdleAfter <= 0 || l.tried {
		return
	}
	l.idle = time.AfterFunc(m.Policy.IdleAfter, func() { m.idleFired(l) })
}

// over reports whether s should change epoch at idle.
func (m *Manager) over(s *session.Session) bool {
	n := m.Engine.Context.NCtx
	return s.Full() || (n > 0 && s.Slot().Total*100 > m.Policy.CompactAt*n)
}

// wouldNotFit reports whether s's next request cannot fit its slot.
func (m *Manager) wouldNotFit(s *session.Session) bool {
	c := m.Engine.Context
	return s.Full() || (c.NCtx > 0 && s.Slot().Total+c.MaxTokens > c.NCtx)
}

// claim marks l busy with a change, if one may start now. l.mu is held.
func (m *Manager) claim(l *live) bool {
	if m.Epoch == nil || l.running || !l.s.Ended() {
		return false
	}
	l.stopIdle()
	l.running, l.tried = true, true
	// A message logged during the change joins the turn after the last
	// one the summary covers.
	l.turn = session.StateOf(l.s.Records()).NextTurn - 1
	m.wg.Add(1)
	return true
}

func (m *Manager) idleFired(l *live) {
	l.mu.Lock()
	if m.ctx.Err() != nil || l.running || l.tried || !m.over(l.s) || !m.claim(l) {
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	go func() {
		defer m.wg.Done()
		if _, err := m.change(l); err != nil {
			m.Log.Error("epoch change failed", "session", l.s.ID, "trigger", "idle", "err", err.Error())
		}
		m.afterChange(l)
	}()
}

// change runs an epoch change of a claimed session and swaps in the new
// epoch under l.mu, in the same critical section that commits it.
func (m *Manager) change(l *live) (*epoch.Result, error) {
	old := l.s
	res, err := m.Epoch.Change(m.ctx, old, &l.mu, func(ns *session.Session) { l.s = ns })
	if err != nil {
		return nil, err
	}
	sc, sp := figures(res.Summary)
	_, wp := figures(res.Warm)
	m.Log.Info("epoch changed", "session", old.ID, "epoch", res.Session.Epoch,
		"summary_cache_n", sc, "summary_prompt_n", sp, "warm_prompt_n", wp)
	return res, nil
}

// figures are a completion's cache_n and prompt_n, -1 when unknown.
func figures(t *llama.Timings) (int, int) {
	if t == nil {
		return -1, -1
	}
	return t.CacheN, t.PromptN
}

// afterChange runs the turns of messages that arrived during a change,
// or ends the claim.
func (m *Manager) afterChange(l *live) {
	l.mu.Lock()
	if len(l.next) == 0 || m.ctx.Err() != nil {
		for _, sub := range l.next {
			sub.send(&wire.Error{Op: "turn", Kind: wire.Unavailable, Msg: "loopd is stopping; your message is logged and goes with the session's next turn"})
		}
		l.running, l.next = false, nil
		l.mu.Unlock()
		return
	}
	l.turn, l.cur, l.next = l.turn+1, l.next, nil
	l.mu.Unlock()
	m.run(l)
}

// beforeTurn changes the epoch before a turn that would not fit, so the
// turn runs in the new one with nothing lost. If the change fails the
// turn runs anyway and ends with session_full, as before.
func (m *Manager) beforeTurn(l *live, emit func(strict.Variant)) {
	l.mu.Lock()
	s := l.s
	l.mu.Unlock()
	if m.Epoch == nil || !s.Ended() || !m.wouldNotFit(s) {
		return
	}
	emit(&wire.Working{Session: s.ID})
	if _, err := m.change(l); err != nil {
		m.Log.Error("epoch change failed", "session", s.ID, "trigger", "full", "err", err.Error())
	}
}

// compact serves [wire.Compact], the owner's bxctl compact: it changes
// the session's epoch now and answers once the new one is committed.
func (m *Manager) compact(_ context.Context, _ sockets.Peer, c *wire.Compact) strict.Variant {
	refuse := func(kind wire.Kind, msg string) strict.Variant {
		return &wire.Error{Op: "compact", Kind: kind, Msg: msg + "; see docs/runbook.md#compact-refused"}
	}
	if err := wire.CheckSessionID(c.Session); err != nil {
		return &wire.Error{Op: "compact", Kind: wire.Invalid, Msg: err.Error()}
	}
	if _, err := os.Stat(session.Dir(m.State, c.Session)); errors.Is(err, fs.ErrNotExist) {
		return refuse(wire.Invalid, fmt.Sprintf("compact: there is no session %q", c.Session))
	}
	l, err := m.open(c.Session, "")
	if err != nil {
		return &wire.Error{Op: "compact", Kind: wire.Unavailable, Msg: "the session log could not be read: " + err.Error()}
	}
	l.mu.Lock()
	switch {
	case m.Epoch == nil:
		l.mu.Unlock()
		return refuse(wire.Unavailable, "compact: this loopd has no epoch changer configured")
	case l.running:
		l.mu.Unlock()
		return refuse(wire.Unavailable, fmt.Sprintf("compact: session %s has a turn running (or waiting for an approval, or changing epoch); its epoch changes only when it is idle, so try again when the turn has ended", c.Session))
	}
	if err := turn.Interrupted(l.s); err != nil {
		l.mu.Unlock()
		return &wire.Error{Op: "compact", Kind: wire.Unavailable, Msg: "closing the interrupted turn failed: " + err.Error()}
	}
	if !m.claim(l) {
		e := l.s.Epoch
		l.mu.Unlock()
		return refuse(wire.Invalid, fmt.Sprintf("compact: no turn has ended in session %s's epoch %d yet, so there is nothing to summarise", c.Session, e))
	}
	l.mu.Unlock()
	defer m.wg.Done()
	res, err := m.change(l)
	defer m.afterChangeAsync(l)
	if err != nil {
		m.Log.Error("epoch change failed", "session", c.Session, "trigger", "compact", "err", err.Error())
		return &wire.Error{Op: "compact", Kind: wire.Unavailable, Msg: "compact: the epoch change failed (" + err.Error() + "); the session goes on in its current epoch; see docs/runbook.md#epoch-change-failed"}
	}
	out := &wire.Compacted{Session: c.Session, Epoch: res.Session.Epoch, Summary: summaryOf(res.Session)}
	return out
}

// afterChangeAsync runs afterChange on its own goroutine, so the owner's
// answer is not held up by the turns that waited.
func (m *Manager) afterChangeAsync(l *live) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.afterChange(l)
	}()
}

func summaryOf(s *session.Session) string {
	for _, r := range s.Records() {
		if sum, ok := r.(*sessionlog.Summary); ok {
			return sum.Text
		}
	}
	return ""
}
