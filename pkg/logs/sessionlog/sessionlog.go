// Package sessionlog is the record vocabulary of a session log
// (sessions/<id>/<epoch>.jsonl): loopd writes and replays it, memoryd reads
// it ([Scan]) to index experience and to file it to fleet memory. One
// definition for writer and readers, so a record loopd writes is a record
// memoryd decodes.
//
// Invariant: every record is decoded strictly through [Records]; an
// unknown record type, field or tool result status is an error, never
// skipped. An epoch after 0 starts with a [Head] whose taint and
// untrusted flag every reader starts from ([TrustOf], [Scan]), so trust
// never goes down across epochs (epoch.go). [Scan] follows no symlink and
// reads only regular files (read.go).
package sessionlog

import (
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Every record carries the turn it belongs to. A user message that arrives
// while turn N runs is logged at once with turn N+1: replay orders records
// by turn (stably), so it reaches the model after turn N's records.

// User is one message from the owner (or the channel's user).
type User struct {
	Turn int64  `json:"turn"`
	Text string `json:"text"`
	// Files are the descriptors of the files posted with the message
	// (never their content): replay shows each as a labelled line after
	// the text ([FileLine]).
	Files []wire.FileRef `json:"files,omitempty"`
}

// Assistant is one model reply, exactly as the server streamed it.
type Assistant struct {
	Turn    int64        `json:"turn"`
	Message chat.Message `json:"message"`
}

// ToolResult answers one tool call of the preceding assistant message.
// Its status is brokerd's [wire.ToolStatus] as loopd received it (or
// loopd's own ending), spelled in the log's words (status.go). Only
// StatusRan and StatusFailed carry tool output.
type ToolResult struct {
	Turn            int64           `json:"turn"`
	CallID          string          `json:"call_id"`
	Tool            string          `json:"tool"` // the target tool, never call_tool
	Status          wire.ToolStatus `json:"status"`
	Content         string          `json:"content"` // what the model sees, capped when logged
	Truncated       bool            `json:"truncated"`
	dataclass.Label                 // brokerd's label of the content, as it came (public for loopd's own results)
	// Posted is the file a post_file put in outbox/ for the turn's
	// answer (issue 29); absent for every other call.
	Posted *wire.PostedFile `json:"posted,omitempty"`
}

// Usage follows each Assistant record: what the server reported about the
// completion, in whole numbers (microseconds for times: the wire has no
// floats).
type Usage struct {
	Turn            int64 `json:"turn"`
	CacheN          int   `json:"cache_n"`
	PromptN         int   `json:"prompt_n"`
	PredictedN      int   `json:"predicted_n"`
	PromptUS        int64 `json:"prompt_us"`
	PredictedUS     int64 `json:"predicted_us"`
	PromptTokens    int   `json:"prompt_tokens"`
	ReasoningTokens int   `json:"reasoning_tokens"`
	CapFired        bool  `json:"cap_fired"`
	CacheGap        int   `json:"cache_gap"`
	// CapAt is the reasoning-token count at which the thinking cap fired
	// and loopd sent reasoning_end (the cap then in force); absent when it
	// did not fire. The turn goes on: the server closes the thinking block
	// and the model answers (Inference contract 8, decision P4).
	CapAt int `json:"cap_at,omitempty"`
	// CapRefused says why the reasoning_end request did not take effect
	// (a transport error, or the server's success:false); absent when the
	// server accepted it or the cap did not fire.
	CapRefused string `json:"cap_refused,omitempty"`
}

// CacheLoss records that the server re-read more than the last token: an
// expected event on a shared server, never an error.
type CacheLoss struct {
	Turn      int64 `json:"turn"`
	Tokens    int   `json:"tokens"`
	PrevTotal int   `json:"prev_total"`
	Cached    int   `json:"cached"`
}

// Approval records an approval's state as loopd learned it.
type Approval struct {
	Turn   int64  `json:"turn"`
	CallID string `json:"call_id"`
	ID     int64  `json:"id"`
	State  string `json:"state"` // "pending", "approved", "refused", "expired"
}

// Stopped records runaway control ending a turn.
type Stopped struct {
	Turn   int64           `json:"turn"`
	Reason wire.StopReason `json:"reason"`
	Msg    string          `json:"msg"`
}

// TurnEnd closes a turn. A turn with no TurnEnd was interrupted.
type TurnEnd struct {
	Turn int64 `json:"turn"`
}

// Tags.
func (*User) Tag() string       { return "user" }
func (*Assistant) Tag() string  { return "assistant" }
func (*ToolResult) Tag() string { return "tool_result" }
func (*Usage) Tag() string      { return "usage" }
func (*CacheLoss) Tag() string  { return "cache_loss" }
func (*Approval) Tag() string   { return "approval" }
func (*Stopped) Tag() string    { return "stopped" }
func (*TurnEnd) Tag() string    { return "turn_end" }

// Record is one line of the log.
type Record interface {
	strict.Variant
	// TurnOf is the turn the record belongs to.
	TurnOf() int64
}

func (r *User) TurnOf() int64       { return r.Turn }
func (r *Assistant) TurnOf() int64  { return r.Turn }
func (r *ToolResult) TurnOf() int64 { return r.Turn }
func (r *Usage) TurnOf() int64      { return r.Turn }
func (r *CacheLoss) TurnOf() int64  { return r.Turn }
func (r *Approval) TurnOf() int64   { return r.Turn }
func (r *Stopped) TurnOf() int64    { return r.Turn }
func (r *TurnEnd) TurnOf() int64    { return r.Turn }

// Records is the union of every record type.
var Records = strict.NewUnion[Record]("type",
	func() Record { return new(User) },
	func() Record { return new(Assistant) },
	func() Record { return new(ToolResult) },
	func() Record { return new(Usage) },
	func() Record { return new(CacheLoss) },
	func() Record { return new(Approval) },
	func() Record { return new(Stopped) },
	func() Record { return new(TurnEnd) },
	func() Record { return new(Head) },
	func() Record { return new(Summary) },
)
