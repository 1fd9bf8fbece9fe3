package wire

import "wntrmute.dev/boxmaker/pkg/socket/strict"

// # Answers that do not nag
//
// An owner approving a call says how far the yes reaches ([AnswerScope]):
// this call only, the rest of the session for calls inside the approved
// call's exact scope (a session allowance, brokerd's policy rule 10), or
// the same for files in the approved file's directory. On admin.sock
// bxctl lists the live allowances ([ListAllowances]) and revokes one
// ([RevokeAllowance]); in the chat `!revoke ID` reaches brokerd on the
// approval's gateway.sock connection, which stays open while the
// allowance made from it lives.

// AnswerScope is how far an approval reaches. The zero value is this
// call only.
type AnswerScope string

// The scopes; append-only.
const (
	ScopeCall       AnswerScope = ""            // this call only
	ScopeSession    AnswerScope = "session"     // and the same call for the rest of the session's epoch
	ScopeSessionDir AnswerScope = "session_dir" // and any file directly in the same directory, likewise
	ScopeAlways     AnswerScope = "always"      // and a grant proposal for the owner to apply (bxctl grants apply)
)

var answerScopes = []AnswerScope{ScopeCall, ScopeSession, ScopeSessionDir, ScopeAlways}

// UnmarshalText refuses a scope this version does not know.
func (s *AnswerScope) UnmarshalText(b []byte) error {
	for _, v := range answerScopes {
		if string(b) == string(v) {
			*s = v
			return nil
		}
	}
	return &strict.Error{Reason: "unknown approval scope " + string(b)}
}

// ParseAnswerScope reads the word an owner typed after the code
// ("session", "session dir"; nothing for this call only).
func ParseAnswerScope(words []string) (AnswerScope, bool) {
	switch {
	case len(words) == 0:
		return ScopeCall, true
	case len(words) == 1 && words[0] == "session":
		return ScopeSession, true
	case len(words) == 2 && words[0] == "session" && words[1] == "dir":
		return ScopeSessionDir, true
	case len(words) == 1 && words[0] == "always":
		return ScopeAlways, true
	}
	return "", false
}

// OutcomeAllowance is an [Answered] outcome: approved, and a session
// allowance was made from the answer. On gateway.sock the connection then
// stays open while the allowance lives.
const OutcomeAllowance = "allowance"

// ListAllowances asks brokerd for the live session allowances.
type ListAllowances struct{}

// AllowanceInfo is one live session allowance. ID is the approval it
// was made from; Scope says in words exactly what it covers.
type AllowanceInfo struct {
	ID       int64  `json:"id"`
	Session  string `json:"session"`
	Epoch    int64  `json:"epoch"`
	Tool     string `json:"tool"`
	Scope    string `json:"scope"`
	Grant    string `json:"grant"`
	Approver string `json:"approver"`
	Made     string `json:"made"`    // RFC 3339
	Expires  string `json:"expires"` // RFC 3339: its longest life
}

// Allowances answers ListAllowances, in id order.
type Allowances struct {
	Allowances []AllowanceInfo `json:"allowances"`
}

// RevokeAllowance ends session allowance ID now. brokerd answers
// [Answered] with outcome "revoked", or an [*Error] if none is live.
type RevokeAllowance struct {
	ID int64 `json:"id"`
}

// DropProposal asks brokerd to delete grant proposal ID from proposals/
// (the owner cannot: the directory is brokerd's). brokerd answers
// [Answered] with outcome "dropped", or an [*Error].
type DropProposal struct {
	ID int64 `json:"id"`
}

// WriteProposal asks brokerd to write Text, a standing grant with id
// always-ID, as grant proposal ID in proposals/ (`bxctl grants suggest
// --write`: the owner cannot write there). brokerd writes it only if it
// parses as exactly that one standing grant and the call its audit log
// recorded as seq ID targets what the grant names; it never replaces a
// proposal. It answers [Answered] with outcome "written", or an [*Error].
type WriteProposal struct {
	ID   int64  `json:"id"`
	Text string `json:"text"`
}

// MaxProposalText caps a [WriteProposal]'s text: one grant and its
// comment.
const MaxProposalText = 16 << 10

// Tags.
func (*DropProposal) Tag() string    { return "drop_proposal" }
func (*WriteProposal) Tag() string   { return "write_proposal" }
func (*ListAllowances) Tag() string  { return "list_allowances" }
func (*Allowances) Tag() string      { return "allowances" }
func (*RevokeAllowance) Tag() string { return "revoke_allowance" }
