package sessionlog

import (
	"slices"

	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// Replayer is [Replay] kept up to date as records are appended, so that a
// model call costs the new records, not the whole log. Its Messages
// returns exactly what Replay returns for the same system prompt, records
// and turn (TestReplayerMatchesReplay checks it on random logs).
//
// Only message records (user, assistant, tool result) shape the messages,
// so only they are kept. A call extends the previous result when every
// message it adds belongs to a turn no earlier than the last one already
// in it: stable ordering by turn then puts the new messages after the old
// ones, in log order. Anything else (an earlier upTo, a record for an
// earlier turn, another system prompt) rebuilds from all the records.
//
// Messages hands out a slice of its own array; the messages in a slice it
// returned are never written again (a rebuild gets a new array), so a
// request still being encoded or sent is never changed under it. Callers
// must not modify them. A Replayer is not safe for concurrent use.
type Replayer struct {
	recs []Record // the message records added, in log order

	built   bool
	system  string
	upTo    int64
	used    int   // recs[:used] have been placed in msgs or pending
	pending []int // indices in recs of placed records with a turn after upTo, in log order
	last    int64 // the highest turn among the records in msgs
	msgs    []chat.Message
}

// Add appends records in log order; records that are not messages are
// ignored.
func (p *Replayer) Add(recs ...Record) {
	for _, r := range recs {
		switch r.(type) {
		case *User, *Assistant, *ToolResult, *Summary:
			p.recs = append(p.recs, r)
		}
	}
}

// Messages returns Replay(Baseline{System: system}, records, upTo) for the
// records added so far.
func (p *Replayer) Messages(system string, upTo int64) []chat.Message {
	if !p.built || system != p.system || upTo < p.upTo || !p.extend(upTo) {
		p.rebuild(system, upTo)
	}
	return p.msgs[:len(p.msgs):len(p.msgs)]
}

// extend appends the messages that join for upTo, or reports that they
// cannot simply be appended (and changes nothing).
func (p *Replayer) extend(upTo int64) bool {
	var join, wait []int
	for _, i := range p.pending {
		if p.recs[i].TurnOf() <= upTo {
			join = append(join, i)
		} else {
			wait = append(wait, i)
		}
	}
	for i := p.used; i < len(p.recs); i++ {
		if p.recs[i].TurnOf() <= upTo {
			join = append(join, i)
		} else {
			wait = append(wait, i)
		}
	}
	for _, i := range join {
		if p.recs[i].TurnOf() < p.last {
			return false // it belongs before messages already handed out
		}
	}
	// join is in log order; order it by turn, stably, as Replay does.
	slices.SortStableFunc(join, func(a, b int) int {
		ta, tb := p.recs[a].TurnOf(), p.recs[b].TurnOf()
		switch {
		case ta < tb:
			return -1
		case ta > tb:
			return 1
		}
		return 0
	})
	for _, i := range join {
		p.msgs = append(p.msgs, message(p.recs[i]))
		p.last = max(p.last, p.recs[i].TurnOf())
	}
	p.upTo, p.used, p.pending = upTo, len(p.recs), wait
	return true
}

func (p *Replayer) rebuild(system string, upTo int64) {
	p.msgs = Replay(Baseline{System: system}, p.recs, upTo) // a new array
	p.built, p.system, p.upTo, p.used, p.pending, p.last = true, system, upTo, len(p.recs), nil, 0
	for i, r := range p.recs {
		if t := r.TurnOf(); t > upTo {
			p.pending = append(p.pending, i)
		} else {
			p.last = max(p.last, t)
		}
	}
}
