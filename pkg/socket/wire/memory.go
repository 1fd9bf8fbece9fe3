package wire

import (
	"encoding/json"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// # memory.sock, memtool.sock and memadmin.sock
//
// memoryd listens on three sockets. On memtool.sock brokerd forwards each
// memory tool call it has decided (recall, ask_memory, memory: auto by a
// rule no grant can change), one [MemtoolCall] per connection, with the
// session's taint and untrusted flag as brokerd tracks them; memoryd
// answers with one [ToolResult] or [*Error]. memoryd labels its own
// results (recall's hits carry their class); brokerd records them like
// any result. On memory.sock loopd sends one request per
// connection: [IdentityRequest] when a session's epoch starts, answered
// with [IdentityBlock] (the three identity files, checked again, each with
// how full it is), or [TurnDone] when a turn has ended, answered with
// [TurnIndexed] once memoryd has indexed it from the session log (loopd
// never sends the turn's text: memoryd reads sessions/ itself). On
// memadmin.sock bxctl sends [MemoryUndo], [Reindex], [ReviewList] or
// [ReviewDecide], [MemoryWhy] or [MemoryForget], answered with [MemoryDone],
// [ReviewItems] or [WhyChain]. Any socket
// may answer [*Error] instead.
//
// Every message of the three sockets is in [MemorydMessages], so each
// socket tells a message meant for another and refuses it with
// [Forbidden]: a session's tool call must never undo an edit or read the
// identity block, and loopd must never make a memory edit.

// MemtoolCall is a decided memory tool call, brokerd to memoryd on
// memtool.sock. (It is no message of memory.sock, which carries loopd's
// identity requests and ended turns.)
type MemtoolCall struct {
	Session   string          `json:"session"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Taint     dataclass.Class `json:"taint"`
	Untrusted bool            `json:"untrusted"`
}

// MemtoolMessages is every message of memtool.sock, as brokerd reads its
// answers.
var MemtoolMessages = strict.NewUnion[strict.Variant]("type",
	func() strict.Variant { return new(MemtoolCall) },
	func() strict.Variant { return new(ToolResult) },
	func() strict.Variant { return new(Error) },
)

// IdentityRequest asks for the identity block of a new epoch.
type IdentityRequest struct {
	Session string `json:"session"`
	Epoch   int64  `json:"epoch"`
	// Channel is the session's Mattermost channel as its baseline holds
	// it ([Send]'s), "" for none: memoryd's projects are sets of
	// channels, and recall in the session searches its project's memory.
	Channel string `json:"channel,omitempty"`
}

// IdentityBlock is the identity block: soul.md, memory.md and user.md, in
// that order, each under a heading that says how full it is. It goes into
// the epoch's baseline after the system prompt.
type IdentityBlock struct {
	Text string `json:"text"`
}

// TurnDone says a turn of a session's epoch has ended and is on disk.
type TurnDone struct {
	Session string `json:"session"`
	Epoch   int64  `json:"epoch"`
	Turn    int64  `json:"turn"`
}

// TurnIndexed answers TurnDone: how many records memoryd indexed (0 when
// the session is above the configured class, or was indexed already).
type TurnIndexed struct {
	Records int `json:"records"`
}

// MemoryUndo asks memoryd to undo the latest edit of an identity file
// ("memory.md" or "user.md").
type MemoryUndo struct {
	File string `json:"file"`
}

// Reindex asks memoryd to rebuild its index from sessions/ and notes.md.
type Reindex struct{}

// ReviewList asks for the staged identity writes and the untrusted notes.
type ReviewList struct{}

// ReviewItem is one staged write or untrusted note, with the data class
// of the session it came from: a note above private is never promoted
// (identity is in every prompt), and the owner sees why.
type ReviewItem struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"` // "staged" or "untrusted"
	File    string          `json:"file"` // the identity file it would go to
	Session string          `json:"session"`
	At      string          `json:"at"` // RFC 3339
	Class   dataclass.Class `json:"class"`
	Text    string          `json:"text"`
}

// ReviewItems answers ReviewList, oldest first.
type ReviewItems struct {
	Items []ReviewItem `json:"items"`
}

// ReviewDecide promotes a review item to identity ("promote", into File)
// or drops it ("drop"). Either way the decision is journalled.
type ReviewDecide struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	File   string `json:"file"`
}

// MemoryWhy asks where a memory entry came from: a note ("n12"), a
// session record as recall names it ("session s1 epoch 0 turn 2 record
// 5"), an identity file's entry ("memory.md#2", counted from 1) or a
// fleet memory hit ("honcho workspace W session S peer P"). It only reads.
type MemoryWhy struct {
	ID string `json:"id"`
}

// WhyChain answers MemoryWhy: the entry's provenance as memoryd's own
// files show it, one plain line per link (journal record, session,
// epoch and turn, the session's trust and which tool result made it
// untrusted, class, tombstone). Session and At let bxctl add the links
// only brokerd's audit log holds (the memory call's decision and the
// untrusted result's seq and hash); Session is "" when no session wrote
// the entry. Output is the hex SHA-256 of the memory call's result as the
// session log holds it (brokerd's audit result records the same hash of
// the output), "" when unknown or cut.
type WhyChain struct {
	ID      string   `json:"id"`
	Session string   `json:"session"`
	At      string   `json:"at"`
	Output  string   `json:"output"`
	Steps   []string `json:"steps"`
}

// MemoryForget asks memoryd to forget an entry (an id as [MemoryWhy]
// takes; identity entries are removed with the memory tool's own edits),
// or with Undo set to take a forget back. Nothing is deleted from
// memory/: a tombstone in notes.md, journalled, that the index and
// recall honour; fleet memory deletes what Honcho's API lets it.
type MemoryForget struct {
	ID   string `json:"id"`
	Undo bool   `json:"undo"`
}

// MemoryDone answers an admin request; Msg says what was done.
type MemoryDone struct {
	Msg string `json:"msg"`
}

// Tags.
func (*MemtoolCall) Tag() string     { return "memory_call" }
func (*IdentityRequest) Tag() string { return "identity_request" }
func (*IdentityBlock) Tag() string   { return "identity_block" }
func (*TurnDone) Tag() string        { return "turn_done" }
func (*TurnIndexed) Tag() string     { return "turn_indexed" }
func (*MemoryUndo) Tag() string      { return "memory_undo" }
func (*Reindex) Tag() string         { return "reindex" }
func (*ReviewList) Tag() string      { return "review_list" }
func (*ReviewItems) Tag() string     { return "review_items" }
func (*ReviewDecide) Tag() string    { return "review_decide" }
func (*MemoryDone) Tag() string      { return "memory_done" }
func (*MemoryWhy) Tag() string       { return "memory_why" }
func (*WhyChain) Tag() string        { return "why_chain" }
func (*MemoryForget) Tag() string    { return "memory_forget" }

// MemorydMessages is every message of memoryd's three sockets.
var MemorydMessages = strict.NewUnion[strict.Variant]("type",
	func() strict.Variant { return new(MemtoolCall) },
	func() strict.Variant { return new(ToolResult) },
	func() strict.Variant { return new(IdentityRequest) },
	func() strict.Variant { return new(IdentityBlock) },
	func() strict.Variant { return new(TurnDone) },
	func() strict.Variant { return new(TurnIndexed) },
	func() strict.Variant { return new(MemoryUndo) },
	func() strict.Variant { return new(Reindex) },
	func() strict.Variant { return new(ReviewList) },
	func() strict.Variant { return new(ReviewItems) },
	func() strict.Variant { return new(ReviewDecide) },
	func() strict.Variant { return new(MemoryDone) },
	func() strict.Variant { return new(FleetStatus) },
	func() strict.Variant { return new(FleetState) },
	func() strict.Variant { return new(FleetResync) },
	func() strict.Variant { return new(TieringRequest) },
	func() strict.Variant { return new(TieringStats) },
	func() strict.Variant { return new(MemoryWhy) },
	func() strict.Variant { return new(WhyChain) },
	func() strict.Variant { return new(MemoryForget) },
	func() strict.Variant { return new(ChatWhy) },
	func() strict.Variant { return new(ChatForget) },
	func() strict.Variant { return new(ForgetCode) },
	func() strict.Variant { return new(Error) },
)

// MemoryFrameMax caps frames on memoryd's three sockets: a capped tool
// result plus its envelope, like broker.sock's.
const MemoryFrameMax = 1 << 20

// IdentityLimit is each identity file's size limit, in characters: memoryd
// enforces it on every write and when the identity block is built, and
// `bxctl memory check FILE` checks a hand-edited file against it.
var IdentityLimit = map[string]int{"soul.md": 4000, "memory.md": 2200, "user.md": 1375}

// OwnerSession is the session recorded for the owner's own memory writes
// (undo, review decisions) in the journal and notes.md. It fails
// [CheckSessionID] on purpose, so no session can be named like the owner.
const OwnerSession = "(owner)"

// MemoryEdit is one line of memoryd's journal, memory/edits/journal.jsonl:
// every write to memory/, in order. memoryd writes it; `bxctl memory log`
// reads it. For an identity file, Before and After are the SHA-256 of the
// file's content before and after the edit, and edits/<Seq>.before holds
// the content before; Undoes names the edit an undo reverted. For
// notes.md, Note is the note's id.
type MemoryEdit struct {
	Seq     int64  `json:"seq"`
	At      string `json:"at"`
	Session string `json:"session"` // the session, or [OwnerSession] for bxctl
	File    string `json:"file"`
	Action  string `json:"action"`
	Note    string `json:"note,omitempty"`
	Before  string `json:"before,omitempty"`
	After   string `json:"after,omitempty"`
	Undoes  int64  `json:"undoes,omitempty"`
}
