package fleet

import (
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
)

// Turn is what fleet memory takes from one ended turn of a session log:
// the speaker's messages and the agent's final reply, and the labels
// loopd logged (the session's class and trust at the turn's end). Tool
// calls, tool results and reasoning are never read into it.
type Turn struct {
	Session string
	Epoch   int64
	Turn    int64
	Labels  State
	Said    []Line // the speaker's messages, in order
	Reply   *Line  // the final reply; nil if the turn ended without one
}

// Line is one message's text and the log record it is on (from 1).
type Line struct {
	Record int
	Text   string
}

// ReadTurns reads a session log's ended turns with package sessionlog's
// reader, the one the index uses: strictly (a record it does not know is
// an error), and with labels that start from the epoch's head, so a
// compacted session that read untrusted content stays untrusted here.
func ReadTurns(path string) ([]Turn, error) {
	session, epoch, err := sessionlog.Name(path)
	if err != nil {
		return nil, err
	}
	open := map[int64]*Turn{}
	get := func(n int64) *Turn {
		if open[n] == nil {
			open[n] = &Turn{Session: session, Epoch: epoch, Turn: n}
		}
		return open[n]
	}
	var out []Turn
	err = sessionlog.Scan(path, func(n int, v sessionlog.Record, trust sessionlog.Trust) error {
		switch r := v.(type) {
		case *sessionlog.User:
			t := get(r.Turn)
			t.Said = append(t.Said, Line{n, r.Text})
		case *sessionlog.Assistant:
			// Only a reply that calls no tool can be the final one;
			// the content beside a tool call is the agent thinking
			// aloud before it acts. Reasoning is never read.
			t := get(r.Turn)
			if len(r.Message.ToolCalls) == 0 && r.Message.Content != "" {
				t.Reply = &Line{n, r.Message.Content}
			} else {
				t.Reply = nil
			}
		case *sessionlog.TurnEnd:
			t := get(r.Turn)
			t.Labels = State{Taint: trust.Taint, Untrusted: trust.Untrusted}
			out = append(out, *t)
			delete(open, r.Turn)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
