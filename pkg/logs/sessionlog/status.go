package sessionlog

import (
	"fmt"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// # The status in the log's words
//
// A [ToolResult]'s status is [wire.ToolStatus], the one status of a tool
// call from brokerd's answer to this log: loopd stores what broker.sock
// brought, as it is. The log spells it in its own words, as it always has:
//
//	wire.StatusRan         "ok"
//	wire.StatusFailed      "error"
//	wire.StatusDenied      "denied"
//	wire.StatusNotRun      "not_run"
//	wire.StatusInterrupted "interrupted"
//
// Epochs are hash-linked and never rewritten, a rollback runs an older
// loopd and memoryd on the same logs without a state format change
// (docs/upgrade.md), and `bxctl report` counts results by these words;
// broker.sock's golden files spell the first two "ran" and "failed". The
// table below is the record's encoding, read and written in one place: it
// maps a status to a word, never one status type to another (there is no
// other; docs/decisions.md, "one tool status").

// logWords is the log's word for each status, both ways.
var logWords = []struct {
	status wire.ToolStatus
	word   string
}{
	{wire.StatusRan, "ok"},
	{wire.StatusFailed, "error"},
	{wire.StatusDenied, "denied"},
	{wire.StatusNotRun, "not_run"},
	{wire.StatusInterrupted, "interrupted"},
}

// Word is s as the session log spells it ("ok" for [wire.StatusRan]), ""
// for a status the log has no word for.
func Word(s wire.ToolStatus) string {
	for _, w := range logWords {
		if w.status == s {
			return w.word
		}
	}
	return ""
}

// statusOf is the status the log's word w stands for; false for a word
// this version does not know, broker.sock's ("ran", "failed") included:
// the log never held them.
func statusOf(w string) (wire.ToolStatus, bool) {
	for _, l := range logWords {
		if l.word == w {
			return l.status, true
		}
	}
	return "", false
}

// loggedResult is a [ToolResult] line as the log holds it: the same
// fields in the same order (TestLoggedResultMirrors), the status in the
// log's words. Type is the record tag, which [Records] has already
// checked.
type loggedResult struct {
	Type      string `json:"type,omitempty"`
	Turn      int64  `json:"turn"`
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Status    string `json:"status"` // the log's word
	Content   string `json:"content"`
	Truncated bool   `json:"truncated"`
	dataclass.Label
	Posted *wire.PostedFile `json:"posted,omitempty"`
}

// MarshalJSON writes r in the log's words, without the tag ([Records]
// adds it).
func (r ToolResult) MarshalJSON() ([]byte, error) {
	w := Word(r.Status)
	if w == "" {
		return nil, fmt.Errorf("tool result status %q has no word in the session log", string(r.Status))
	}
	return strict.Marshal(loggedResult{Turn: r.Turn, CallID: r.CallID, Tool: r.Tool, Status: w, Content: r.Content,
		Truncated: r.Truncated, Label: r.Label, Posted: r.Posted})
}

// UnmarshalJSON reads a line in the log's words, strictly (package strict
// checks a self-decoding type only for well-formed JSON, so this is where
// unknown and missing fields are refused).
func (r *ToolResult) UnmarshalJSON(b []byte) error {
	var l loggedResult
	if err := strict.Unmarshal(b, &l); err != nil {
		return err
	}
	st, ok := statusOf(l.Status)
	if !ok {
		return &strict.Error{Path: "status", Reason: fmt.Sprintf("unknown tool result status %q", l.Status)}
	}
	if l.Type != "" && l.Type != r.Tag() {
		return &strict.Error{Path: "type", Reason: fmt.Sprintf("a %s record is not a %s", l.Type, r.Tag())}
	}
	*r = ToolResult{Turn: l.Turn, CallID: l.CallID, Tool: l.Tool, Status: st, Content: l.Content,
		Truncated: l.Truncated, Label: l.Label, Posted: l.Posted}
	return nil
}
