package recall

import (
	"fmt"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// memoryd reads loopd's session logs (sessions/<id>/<epoch>.jsonl) with
// the record types loopd writes them with (pkg/logs/sessionlog), strictly: a
// record type or field it does not know stops the indexing of that log
// loudly, rather than being skipped.

// Doc is one indexed item: a message of a session, or a note.
type Doc struct {
	Text    string
	Source  string          // identity, memory or memory-tainted
	Class   dataclass.Class // the session's taint at the turn's end, or the note's
	Session string          // "" for a note
	Epoch   int64
	Turn    int64
	Record  int    // line of the log, from 1
	Note    string // the note's id, "" for a session record
	// Where names a fleet memory hit's origin (its Honcho workspace,
	// session and peer); "" for a local one.
	Where string
	// Fleet is a fleet memory hit's message id (package fleet's
	// MessageID), to drop one the local index holds too.
	Fleet string
	// Project is the project of the session that wrote it (memoryd's
	// [[project]]), "" for the agent's own memory.
	Project string
}

// Key names what a tombstone forgets: a note's id, or a session record
// in the words recall shows it with (package store's RecordKey).
func (d Doc) Key() string {
	if d.Note != "" {
		return d.Note
	}
	return fmt.Sprintf("session %s epoch %d turn %d record %d", d.Session, d.Epoch, d.Turn, d.Record)
}

// Turn is one ended turn of a session log and the documents it yields.
type Turn struct {
	Session   string
	Epoch     int64
	Turn      int64
	Class     dataclass.Class
	Untrusted bool
	Docs      []Doc
}

// ReadLog reads one session log and returns its ended turns, in the order
// they ended. A turn's class and trust are the session's as of the turn's
// end: the reply was made from the whole context so far, which in an
// epoch after 0 includes the summary of the epochs before it, so its
// head's taint and untrusted flag are where each starts (package
// sessionlog's [sessionlog.Scan] reads the log for this reader and fleet
// memory's alike). Tool results are not indexed (only the calls, by name
// and arguments).
func ReadLog(path string) ([]Turn, error) {
	session, epoch, err := sessionlog.Name(path)
	if err != nil {
		return nil, err
	}
	open := map[int64][]Doc{}
	var out []Turn
	err = sessionlog.Scan(path, func(n int, v sessionlog.Record, trust sessionlog.Trust) error {
		doc := func(turn int64, text string) {
			if text != "" {
				open[turn] = append(open[turn], Doc{Text: text, Session: session, Epoch: epoch, Turn: turn, Record: n})
			}
		}
		switch r := v.(type) {
		case *sessionlog.User:
			doc(r.Turn, r.Text)
		case *sessionlog.Assistant:
			doc(r.Turn, r.Message.Content)
			for _, c := range r.Message.ToolCalls {
				doc(r.Turn, c.Function.Name+" "+c.Function.Arguments)
			}
		case *sessionlog.TurnEnd:
			t := Turn{Session: session, Epoch: epoch, Turn: r.Turn, Class: trust.Taint, Untrusted: trust.Untrusted, Docs: open[r.Turn]}
			for i := range t.Docs {
				t.Docs[i].Class, t.Docs[i].Source = trust.Taint, SourceOf(trust.Untrusted)
			}
			delete(open, r.Turn)
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SourceOf is the source tag of a session's experience.
func SourceOf(untrusted bool) string {
	if untrusted {
		return SourceTainted
	}
	return SourceMemory
}
