package wire

import (
	"encoding/json"
	"regexp"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// # broker.sock and admin.sock
//
// brokerd listens on two sockets. On broker.sock loopd sends one
// [ToolRequest] per connection: the tool call exactly as the model made it
// (call_tool included: brokerd, not loopd, finds its target). brokerd
// answers with [ToolPending] if the call waits for the owner, then exactly
// one [ToolResult] or [*Error]. On admin.sock bxctl sends [ListApprovals],
// [GetApproval], [Approve] or [Refuse] and gets one answer each.
//
// Every message of both sockets is in [BrokerMessages], so that each
// socket can tell a message meant for the other and refuse it with
// [Forbidden] (anything that could reach the approving socket could
// otherwise approve its own calls).

// ToolRequest asks brokerd to decide, and if allowed run, one tool call.
type ToolRequest struct {
	Session   string          `json:"session"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Epoch is the session's epoch (loopd's session log): a session
	// allowance is made for one epoch and ends when the calls of its
	// session name another.
	Epoch int64 `json:"epoch,omitempty"`
}

// ToolPending says the call waits for the owner's answer to approval ID
// until Expires (RFC 3339).
type ToolPending struct {
	ID      int64  `json:"id"`
	Tool    string `json:"tool"`
	Expires string `json:"expires"`
}

// ToolStatus is how a tool call ended: the one status of a call, from
// brokerd's answer through loopd to the session log, where
// pkg/logs/sessionlog spells it in the log's own words (docs/decisions.md,
// "one tool status"). No second status type exists (checks/arch
// TestRepoOneToolStatus).
type ToolStatus string

// The statuses; append-only. Ran, Failed and Denied are brokerd's and
// cross broker.sock; NotRun and Interrupted are loopd's own endings of a
// call brokerd never answered, written only to the session log.
const (
	StatusRan    ToolStatus = "ran"    // the tool ran and succeeded; Output is what it printed
	StatusFailed ToolStatus = "failed" // it ran and failed, or could not be run; Output says why
	StatusDenied ToolStatus = "denied" // refused (policy, the owner, expiry); Output is the reason

	StatusNotRun      ToolStatus = "not_run"     // runaway control stopped the turn before the call
	StatusInterrupted ToolStatus = "interrupted" // loopd stopped before the result came
)

// brokerStatuses are the statuses broker.sock carries.
var brokerStatuses = []ToolStatus{StatusRan, StatusFailed, StatusDenied}

// UnmarshalText reads broker.sock's spelling and refuses a status this
// version does not know, and loopd's own endings (not_run, interrupted):
// brokerd never sends them, so a frame that carries one is refused.
func (s *ToolStatus) UnmarshalText(b []byte) error {
	for _, v := range brokerStatuses {
		if string(b) == string(v) {
			*s = v
			return nil
		}
	}
	return &strict.Error{Reason: "unknown tool status " + string(b)}
}

// ToolResult is brokerd's answer. Its label (class and untrusted) is the
// output's: it comes from the grants, never from the tool or from loopd,
// and loopd logs it as it came.
type ToolResult struct {
	Status ToolStatus `json:"status"`
	Output string     `json:"output"`
	dataclass.Label
	// Posted is the file a post_file put in outbox/ for the turn's
	// answer (issue 29); nil for every other call.
	Posted *PostedFile `json:"posted,omitempty"`
}

// PostedFile is a file post_file put in outbox/<session>/<id> to attach
// to the turn's answer.
type PostedFile struct {
	ID   string `json:"id"`   // its name in the session's outbox directory ([PostedIDPattern])
	Name string `json:"name"` // the name to post it under: the source's base name
	Size int64  `json:"size"`
}

// PostedIDPattern is a [PostedFile] id: 32 lower-case hex digits.
var PostedIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// ListApprovals asks for the calls waiting for the owner.
type ListApprovals struct{}

// GetApproval asks for one waiting call in full.
type GetApproval struct {
	ID int64 `json:"id"`
}

// Approve answers approval ID yes. Code is the approval's code, as
// [PendingCall] shows it: an answer without it is refused and answers
// nothing. brokerd decides the call again against the current grants and
// taint before it runs anything.
type Approve struct {
	ID    int64       `json:"id"`
	Code  string      `json:"code"`
	Scope AnswerScope `json:"scope,omitempty"` // allowance.go: this call only, or a session allowance
}

// Refuse answers approval ID no; Code as for [Approve].
type Refuse struct {
	ID     int64  `json:"id"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// PendingCall is one waiting call as brokerd holds it. Arguments are the
// parsed arguments brokerd will act on, never text loopd sent for display.
// Code is the approval's answer code ([ApprovalCodeLen] characters of
// [ApprovalCodeAlphabet]): brokerd draws it at random when it parks the
// call and sends it only on admin.sock and gateway.sock, never on
// broker.sock, so text the model wrote cannot show it.
type PendingCall struct {
	ID        int64           `json:"id"`
	Session   string          `json:"session"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Expires   string          `json:"expires"`
	Code      string          `json:"code"`
	// SessionScope says in words what a session allowance made from this
	// approval would cover (`!approve ID CODE session`); "" when none
	// can be made (a consult).
	SessionScope string `json:"session_scope,omitempty"`
}

// Approvals answers ListApprovals, in id order.
type Approvals struct {
	Calls []PendingCall `json:"calls"`
}

// Approval answers GetApproval.
type Approval struct {
	Call PendingCall `json:"call"`
}

// Answered confirms an owner's answer on admin.sock or gate.sock:
// Outcome is what the answer did ("approved", [OutcomeAllowance] or
// "refused" for an approval; "revoked", "written" or "dropped" for an
// allowance or a grant proposal), and Msg says it in words (for an
// approval, the call's outcome when brokerd knows it). It is not a
// [ToolStatus]: the call's own ending goes to loopd on broker.sock.
type Answered struct {
	ID      int64  `json:"id"`
	Outcome string `json:"outcome"`
	Msg     string `json:"msg"`
}

// Tags.
func (*ToolRequest) Tag() string   { return "tool_request" }
func (*ToolPending) Tag() string   { return "tool_pending" }
func (*ToolResult) Tag() string    { return "tool_result" }
func (*ListApprovals) Tag() string { return "list_approvals" }
func (*GetApproval) Tag() string   { return "get_approval" }
func (*Approve) Tag() string       { return "approve" }
func (*Refuse) Tag() string        { return "refuse" }
func (*Approvals) Tag() string     { return "approvals" }
func (*Approval) Tag() string      { return "approval" }
func (*Answered) Tag() string      { return "answered" }
func (*SessionQuery) Tag() string  { return "session_query" }
func (*SessionState) Tag() string  { return "session_state" }

// BrokerMessages is every message of broker.sock, admin.sock and
// gate.sock.
var BrokerMessages = strict.NewUnion[strict.Variant]("type",
	func() strict.Variant { return new(ToolRequest) },
	func() strict.Variant { return new(ToolPending) },
	func() strict.Variant { return new(ToolResult) },
	func() strict.Variant { return new(ListApprovals) },
	func() strict.Variant { return new(GetApproval) },
	func() strict.Variant { return new(Approve) },
	func() strict.Variant { return new(Refuse) },
	func() strict.Variant { return new(Approvals) },
	func() strict.Variant { return new(Approval) },
	func() strict.Variant { return new(Answered) },
	func() strict.Variant { return new(SessionQuery) },
	func() strict.Variant { return new(SessionState) },
	func() strict.Variant { return new(Error) },
	func() strict.Variant { return new(ConsultPending) },
	func() strict.Variant { return new(ListAllowances) },
	func() strict.Variant { return new(Allowances) },
	func() strict.Variant { return new(RevokeAllowance) },
	func() strict.Variant { return new(DropProposal) },
	func() strict.Variant { return new(WriteProposal) },
	func() strict.Variant { return new(BrokerStatusQuery) },
	func() strict.Variant { return new(BrokerStatus) },
	// MCP tools (mcp.go)
	func() strict.Variant { return new(FindTools) },
	func() strict.Variant { return new(FoundTools) },
	func() strict.Variant { return new(MCPList) },
	func() strict.Variant { return new(MCPListing) },
)

// BrokerFrameMax caps frames on both sockets: a capped tool result plus
// its envelope.
const BrokerFrameMax = 1 << 20
