package wire

import "wntrmute.dev/boxmaker/pkg/socket/strict"

// # gateway.sock
//
// gatewayd listens on gateway.sock for brokerd's courier. Each connection
// carries one pending approval and stays open while it is pending:
// brokerd sends one [PostApproval]; gatewayd answers [ApprovalPosted]
// once the approval is in its thread (or an [*Error] and closes). When an
// approver answers in the chat, gatewayd sends one [OwnerAnswer];
// brokerd answers it with [Answered] (or an [*Error]: the approval was
// answered elsewhere meanwhile) and closes. brokerd closing the
// connection at any other time withdraws the approval: gatewayd edits its
// posts to say so. gatewayd never sees admin.sock: it can answer only the
// approvals brokerd chose to send it, and only by id.

// PostApproval asks gatewayd to post approval Call in its session's
// thread. Call is the call exactly as brokerd holds it.
type PostApproval struct {
	Call PendingCall `json:"call"`
}

// ApprovalPosted says approval ID is in the chat in Parts posts (the last
// one answerable), or, when Answerable is false, as a pointer to bxctl
// approvals only (it was too long for the chat).
type ApprovalPosted struct {
	ID         int64 `json:"id"`
	Parts      int   `json:"parts"`
	Answerable bool  `json:"answerable"`
}

// OwnerAnswer is an approver's answer from the chat. Approver names who
// answered ("mattermost:<user id>"), for the audit log; Code is the code
// the approver typed, which brokerd checks again.
type OwnerAnswer struct {
	ID       int64  `json:"id"`
	Code     string `json:"code"`
	Approve  bool   `json:"approve"`
	Reason   string `json:"reason"`
	Approver string `json:"approver"`
	// Scope is how far an approval reaches (allowance.go).
	Scope AnswerScope `json:"scope,omitempty"`
}

// AllowanceRevoke is an approver's `!revoke ID` in the thread of the
// approval that made session allowance ID, sent on that approval's
// connection, which stays open while the allowance lives. brokerd
// answers [Answered] and closes.
type AllowanceRevoke struct {
	ID       int64  `json:"id"`
	Approver string `json:"approver"`
}

// Tags.
func (*PostApproval) Tag() string    { return "post_approval" }
func (*ApprovalPosted) Tag() string  { return "approval_posted" }
func (*OwnerAnswer) Tag() string     { return "owner_answer" }
func (*AllowanceRevoke) Tag() string { return "allowance_revoke" }

// GatewayMessages is every message of gateway.sock.
var GatewayMessages = strict.NewUnion[strict.Variant]("type",
	func() strict.Variant { return new(PostApproval) },
	func() strict.Variant { return new(ApprovalPosted) },
	func() strict.Variant { return new(OwnerAnswer) },
	func() strict.Variant { return new(AllowanceRevoke) },
	func() strict.Variant { return new(Answered) },
	func() strict.Variant { return new(Error) },
)

// GatewayFrameMax caps gateway.sock's frames: a pending call's arguments
// are capped by broker.sock's frame.
const GatewayFrameMax = BrokerFrameMax
