package server

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// answersSince serves [wire.AnswersSince]: the outcomes of the session's
// finished turns (those with a turn_end record) after AfterTurn, read
// from its log, capped by [wire.MaxAnswers] and [wire.MaxAnswersBytes].
// A session that does not exist has none; asking never creates one. A
// turn a previous loopd left open, started or not, is closed as
// interrupted first; one this loopd runs is reported as running.
func (m *Manager) answersSince(_ context.Context, _ sockets.Peer, a *wire.AnswersSince) strict.Variant {
	if err := wire.CheckSessionID(a.Session); err != nil {
		return &wire.Error{Op: "answers_since", Kind: wire.Invalid, Msg: err.Error()}
	}
	out := &wire.Answers{Session: a.Session, Items: []wire.FinishedTurn{}}
	if _, err := os.Stat(session.Dir(m.State, a.Session)); errors.Is(err, fs.ErrNotExist) {
		return out
	}
	l, err := m.open(a.Session, "")
	if err != nil {
		return &wire.Error{Op: "answers_since", Kind: wire.Unavailable, Msg: "the session log could not be read: " + err.Error()}
	}
	l.mu.Lock()
	if !l.running {
		// A turn a previous loopd left open is over: closed as
		// interrupted now (as the next message would), so its stop
		// message is an outcome the owner is shown.
		if err := errors.Join(turn.Interrupted(l.s), turn.Unanswered(l.s)); err != nil {
			l.mu.Unlock()
			return &wire.Error{Op: "answers_since", Kind: wire.Unavailable, Msg: "closing the interrupted turn failed: " + err.Error()}
		}
	}
	recs, cur, running := l.s.Records(), l.s.Epoch, l.running
	l.mu.Unlock()
	recs, err = m.withEarlier(a.Session, cur, recs, a.AfterTurn)
	if err != nil {
		return &wire.Error{Op: "answers_since", Kind: wire.Unavailable, Msg: "an earlier epoch of the session log could not be read: " + err.Error()}
	}
	out.Items, out.More = finished(recs, a.AfterTurn)
	out.Running = running
	return out
}

// withEarlier puts before recs (epoch cur's) the records of the earlier
// epochs that may hold turns after after: turn numbers go on across
// epochs, so answers that finished before an epoch change are in an
// older file. Old epochs are only read.
func (m *Manager) withEarlier(id string, cur int64, recs []sessionlog.Record, after int64) ([]sessionlog.Record, error) {
	for n := cur; n > 0 && len(recs) > 0; n-- {
		h, ok := recs[0].(*sessionlog.Head)
		if !ok || h.Turn <= after {
			break
		}
		prev, err := session.EpochRecords(m.State, id, n-1)
		if err != nil {
			return nil, err
		}
		recs = append(prev, recs...)
	}
	return recs, nil
}

// finished lists the outcomes of the turns after after that have ended:
// a turn's stop message if it was stopped, else its last assistant
// message's content, in turn order, within the caps.
func finished(recs []sessionlog.Record, after int64) ([]wire.FinishedTurn, bool) {
	last := map[int64]wire.FinishedTurn{}
	var order []int64
	for _, r := range recs {
		switch r := r.(type) {
		case *sessionlog.Assistant:
			if r.Turn > after && len(r.Message.ToolCalls) == 0 {
				if _, ok := last[r.Turn]; !ok || last[r.Turn].Reason == "" {
					last[r.Turn] = wire.FinishedTurn{Turn: r.Turn, Text: r.Message.Content}
				}
			}
		case *sessionlog.Stopped:
			if r.Turn > after {
				last[r.Turn] = wire.FinishedTurn{Turn: r.Turn, Text: r.Msg, Reason: r.Reason}
			}
		case *sessionlog.TurnEnd:
			if _, ok := last[r.Turn]; ok && r.Turn > after {
				order = append(order, r.Turn)
			}
		}
	}
	items := []wire.FinishedTurn{}
	size := 0
	for _, t := range order {
		it := last[t]
		if len(items) == wire.MaxAnswers || (len(items) > 0 && size+len(it.Text) > wire.MaxAnswersBytes) {
			return items, true
		}
		it.Text = cut(it.Text, wire.MaxAnswersBytes-size)
		size += len(it.Text)
		items = append(items, it)
	}
	return items, false
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
