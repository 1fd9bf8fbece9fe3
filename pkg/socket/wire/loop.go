package wire

import (
	"fmt"
	"regexp"
	"slices"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// # loop.sock
//
// loopd listens on loop.sock for gatewayd and bxctl. On one connection the
// client sends [Send] frames; for each, loopd answers with a stream of
// [LoopEvent] frames ending with exactly one of [Answer], [Stopped] or an
// [*Error]. [Accepted] comes first, once the user message is on disk: from
// then on it survives a crash of loopd. A message sent while the session's
// turn is running is queued and goes, with any others queued meanwhile,
// into the next turn; its events are that turn's.

// SessionIDPattern is what a session id may be: it names a directory
// under sessions/, so it is one path element of plain characters.
var SessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// CheckSessionID refuses an id that does not match [SessionIDPattern].
func CheckSessionID(id string) error {
	if !SessionIDPattern.MatchString(id) {
		return fmt.Errorf("session id %q must be 1 to 64 letters, digits, '-' or '_', starting with a letter or digit", id)
	}
	return nil
}

// ChatSessionPrefix starts the id of every session gatewayd makes: the
// prefix and the thread's root post id. memoryd reads a project's
// threads (memoryd.toml's [[project]] threads) by it.
const ChatSessionPrefix = "mm-"

// MaxMessage caps one user message, in bytes.
const MaxMessage = 64 << 10

// Send is a user message for a session (a Mattermost thread, or a terminal
// session). Client to loopd.
type Send struct {
	Session string `json:"session"`
	Text    string `json:"text"`
	// Files are the descriptors of the files posted with the message
	// (gatewayd, attach.go), whose content gatewayd has put in the
	// session's directory under attachments/; the model reads the text
	// ones through read_attachment, never in this message.
	Files []FileRef `json:"files,omitempty"`
	// Channel is the Mattermost channel the thread is in, as gatewayd
	// heard the post ("" for a terminal session). loopd keeps a session's
	// first channel in its baseline and refuses a later message from
	// another; memoryd maps channels to the owner's projects (its
	// [[project]] tables), so a project is never the model's choice.
	Channel string `json:"channel,omitempty"`
}

// MaxFiles caps the files of one [Send].
const MaxFiles = 10

// FileRef describes one file posted with a message: never its content.
type FileRef struct {
	// ID is the file's Mattermost id, the name of its copy in the
	// session's attachments directory.
	ID string `json:"id"`
	// Name is the file's name as posted: the sender's words, shown to the
	// model escaped and labelled.
	Name string `json:"name"`
	// Type is the media type gatewayd sniffed from the content (never the
	// server's or the name's).
	Type string `json:"type"`
	// Size is the bytes kept: the text for a text file or a PDF (its
	// extracted text), the file itself for an image.
	Size int64 `json:"size"`
}

// Tag implements strict.Variant.
func (*Send) Tag() string { return "send" }

// Stop asks loopd to stop the session's running turn (gatewayd's !stop).
// loopd answers [StopDone]; the turn's own followers get [Stopped].
type Stop struct {
	Session string `json:"session"`
}

// Tag implements strict.Variant.
func (*Stop) Tag() string { return "stop" }

// StopDone answers Stop: Stopped says whether a turn was running.
type StopDone struct {
	Session string `json:"session"`
	Stopped bool   `json:"stopped"`
}

// Tag implements strict.Variant.
func (*StopDone) Tag() string { return "stop_done" }

// AnswersSince asks for the final answers (and stop messages) of a
// session's finished turns after AfterTurn, oldest first: gatewayd posts
// what finished while it was down. loopd answers [Answers].
type AnswersSince struct {
	Session   string `json:"session"`
	AfterTurn int64  `json:"after_turn"`
}

// Tag implements strict.Variant.
func (*AnswersSince) Tag() string { return "answers_since" }

// Caps on one [Answers]: at most MaxAnswers items and MaxAnswersBytes of
// text (an item's text is cut to it), so it fits one loop.sock frame; a
// client asks again after the last turn it got.
const (
	MaxAnswers      = 16
	MaxAnswersBytes = MaxMessage
)

// FinishedTurn is one finished turn's outcome: its answer, or, when
// Reason is set, the one-line message of its stop.
type FinishedTurn struct {
	Turn   int64      `json:"turn"`
	Text   string     `json:"text"`
	Reason StopReason `json:"reason,omitempty"`
}

// Answers answers AnswersSince. More says the caps left later turns out.
// Running says a turn of the session is still in flight: its outcome is
// not among Items yet, so a client that missed its start (gatewayd
// restarted while it ran) asks again later.
type Answers struct {
	Session string         `json:"session"`
	Items   []FinishedTurn `json:"items"`
	More    bool           `json:"more"`
	Running bool           `json:"running"`
}

// Tag implements strict.Variant.
func (*Answers) Tag() string { return "answers" }

// Compact asks loopd to change the session's epoch now (bxctl compact):
// the model summarises the epoch on the background slot and the session
// goes on in a new epoch whose prefix is the baseline and the summary.
// loopd answers [Compacted] once the new epoch is on disk, or an
// [*Error] (a turn is running, nothing to summarise, the change failed).
type Compact struct {
	Session string `json:"session"`
}

// Tag implements strict.Variant.
func (*Compact) Tag() string { return "compact" }

// Compacted answers Compact: the session's new epoch and the summary it
// starts from (model text: clients escape it before display).
type Compacted struct {
	Session string `json:"session"`
	Epoch   int64  `json:"epoch"`
	Summary string `json:"summary"`
}

// Tag implements strict.Variant.
func (*Compacted) Tag() string { return "compacted" }

// LoopRequests is every message a client may send on loop.sock.
var LoopRequests = strict.NewUnion[strict.Variant]("type",
	func() strict.Variant { return new(Send) },
	func() strict.Variant { return new(Stop) },
	func() strict.Variant { return new(AnswersSince) },
	func() strict.Variant { return new(Compact) },
	func() strict.Variant { return new(ListJobs) },
	func() strict.Variant { return new(JobReportsSince) },
	func() strict.Variant { return new(StatusQuery) },
)

// Accepted: the message is logged. Queued is true when a turn was running
// and the message waits for the next one.
type Accepted struct {
	Session string `json:"session"`
	Queued  bool   `json:"queued"`
	// Notice, if not empty, is one plain line for the owner about the
	// message: an image among its files that the model will not see
	// (issue 29). gatewayd posts it in the thread.
	Notice string `json:"notice,omitempty"`
}

// Working: the turn has started (or a further model call in it).
type Working struct {
	Session string `json:"session"`
}

// Reasoning is a fragment of the model's thinking, for display only
// (bxctl shows it dimmed; gatewayd shows none).
type Reasoning struct {
	Session string `json:"session"`
	Text    string `json:"text"`
}

// ToolRunning: a tool call was sent to brokerd (or runs in loopd). Tool is
// the target tool, never call_tool.
type ToolRunning struct {
	Session string `json:"session"`
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
}

// ApprovalPending: brokerd parked the call until the owner answers
// approval ID (with bxctl approve, or in the chat).
type ApprovalPending struct {
	Session string `json:"session"`
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	ID      int64  `json:"id"`
}

// ToolDenied: the call was refused; Reason is for the owner.
type ToolDenied struct {
	Session string `json:"session"`
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	Reason  string `json:"reason"`
}

// Answer is the turn's final answer, the model's text as it wrote it.
// Clients escape it before display.
type Answer struct {
	Session string `json:"session"`
	Turn    int64  `json:"turn,omitempty"` // the turn it ends (0 from an older loopd)
	Text    string `json:"text"`
	// Files are the files post_file put in outbox/ during the turn, to
	// attach to the answer's post (issue 29).
	Files []PostedFile `json:"files,omitempty"`
}

// StopReason says why a turn ended without an answer.
type StopReason string

// The reasons; the list is append-only.
const (
	StopThinkingCap    StopReason = "thinking_cap"    // no longer sent: the cap ends only the thinking; older logs carry it
	StopToolIterations StopReason = "tool_iterations" // too many model calls in one turn
	StopRepeatedCall   StopReason = "repeated_call"   // the same tool call again and again
	StopInterrupted    StopReason = "interrupted"     // loopd stopped mid-turn
	StopSessionFull    StopReason = "session_full"    // the next request would not fit the slot's context
)

var stopReasons = []StopReason{StopThinkingCap, StopToolIterations, StopRepeatedCall, StopInterrupted, StopSessionFull}

// UnmarshalText refuses a reason this version does not know.
func (r *StopReason) UnmarshalText(b []byte) error {
	for _, k := range stopReasons {
		if string(b) == string(k) {
			*r = k
			return nil
		}
	}
	return fmt.Errorf("unknown stop reason %q", b)
}

// Stopped: runaway control ended the turn. Msg is for the owner.
type Stopped struct {
	Session string     `json:"session"`
	Turn    int64      `json:"turn,omitempty"` // the turn it ends
	Reason  StopReason `json:"reason"`
	Msg     string     `json:"msg"`
}

// Tag implementations for the events.
func (*Accepted) Tag() string        { return "accepted" }
func (*Working) Tag() string         { return "working" }
func (*Reasoning) Tag() string       { return "reasoning" }
func (*ToolRunning) Tag() string     { return "tool_running" }
func (*ApprovalPending) Tag() string { return "approval_pending" }
func (*ToolDenied) Tag() string      { return "tool_denied" }
func (*Answer) Tag() string          { return "answer" }
func (*Stopped) Tag() string         { return "stopped" }

// LoopEvents is every message loopd sends on loop.sock.
var LoopEvents = strict.NewUnion[strict.Variant]("type",
	func() strict.Variant { return new(Accepted) },
	func() strict.Variant { return new(Working) },
	func() strict.Variant { return new(Reasoning) },
	func() strict.Variant { return new(ToolRunning) },
	func() strict.Variant { return new(ApprovalPending) },
	func() strict.Variant { return new(ToolDenied) },
	func() strict.Variant { return new(Answer) },
	func() strict.Variant { return new(Stopped) },
	func() strict.Variant { return new(StopDone) },
	func() strict.Variant { return new(Answers) },
	func() strict.Variant { return new(Compacted) },
	func() strict.Variant { return new(JobList) },
	func() strict.Variant { return new(JobReports) },
	func() strict.Variant { return new(SessionStatus) },
	func() strict.Variant { return new(Error) },
)

// LoopFrameMax is loop.sock's frame cap: a user message plus envelope.
const LoopFrameMax = MaxMessage + 4096

// FileIDPattern is a [FileRef] id: a Mattermost id (26 characters of
// lower-case base32), which names a file in the attachments directory.
var FileIDPattern = regexp.MustCompile(`^[a-z0-9]{26}$`)

// FileTypes are the media types a [FileRef] may carry: what gatewayd
// keeps (every other type is refused at intake, with a line to the owner).
var FileTypes = []string{"text/plain", "application/pdf", "image/png", "image/jpeg", "image/gif", "image/webp"}

// MaxFileName caps a [FileRef]'s name, in bytes.
const MaxFileName = 255

// CheckFiles refuses descriptors a well-behaved gatewayd never sends.
func CheckFiles(fs []FileRef) error {
	if len(fs) > MaxFiles {
		return fmt.Errorf("%d files, over the limit of %d", len(fs), MaxFiles)
	}
	seen := map[string]bool{}
	for _, f := range fs {
		switch {
		case !FileIDPattern.MatchString(f.ID):
			return fmt.Errorf("file id %q is not a Mattermost id", f.ID)
		case seen[f.ID]:
			return fmt.Errorf("file %s given twice", f.ID)
		case f.Name == "" || len(f.Name) > MaxFileName || !utf8.ValidString(f.Name):
			return fmt.Errorf("file %s: the name must be 1 to %d bytes of UTF-8", f.ID, MaxFileName)
		case !slices.Contains(FileTypes, f.Type):
			return fmt.Errorf("file %s: type %q is not one Boxmaker keeps", f.ID, f.Type)
		case f.Size < 0:
			return fmt.Errorf("file %s: negative size", f.ID)
		}
		seen[f.ID] = true
	}
	return nil
}
