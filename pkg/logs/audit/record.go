package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// DecisionRecord is the plain record of one policy decision, as the audit
// log and the wire carry it. It is not a Decision in the authority sense:
// only brokerd's policy package can make one of those; anyone can build
// this struct, and it authorises nothing.
type DecisionRecord struct {
	Session string `json:"session"`
	// Tool is the target tool: for call_tool(name, arguments), name. It is
	// "call_tool" only in a denial for invalid arguments (call_tool naming
	// itself), so that denial can still be recorded.
	Tool string `json:"tool"`
	// Arguments are the target tool's arguments, as JSON.
	Arguments json.RawMessage `json:"arguments"`
	Verdict
	// Allowance names the session allowance that decided an allowed call
	// without asking (its id, the approval it was made from); 0: none.
	Allowance int64 `json:"allowance,omitempty"`
}

// Verdict is what a decision and an approval's re-decision both record:
// the outcome, why, under which grant, and the session's state when it was
// made. Both records embed it, so its fields are written flat, in this
// order, where each record places it (the bytes of logs written before
// the struct was shared).
type Verdict struct {
	Outcome Outcome `json:"outcome"`
	// Reason and Detail are set for a denial only. Detail is one line of
	// at most MaxDetail characters.
	Reason Reason `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Grant is the grant that matched, if one did: always for a
	// deny_grant denial, never for no_grant.
	Grant *GrantRef `json:"grant,omitempty"`
	// Taint and Untrusted are the session's state when it was decided.
	Taint     dataclass.Class `json:"taint"`
	Untrusted bool            `json:"untrusted"`
}

// GrantRef names a grant by its id and the SHA-256 of its file.
type GrantRef struct {
	ID     string `json:"id"`
	SHA256 string `json:"sha256"`
}

// MaxDetail caps a denial's detail, in characters.
const MaxDetail = 300

// Outcome is a decision's outcome.
type Outcome string

// The outcomes.
const (
	Allowed Outcome = "allowed"
	Ask     Outcome = "ask"
	Denied  Outcome = "denied"
)

// Reason is why a call was denied. The list is append-only.
type Reason string

// The reasons. Add new ones at the end of [Reasons] too.
const (
	NoGrant          Reason = "no_grant"
	DenyGrant        Reason = "deny_grant"
	GrantsInvalid    Reason = "grants_invalid"
	StateUnreadable  Reason = "state_unreadable"
	InvalidArguments Reason = "invalid_arguments"
	// AuditUnavailable is sent to loopd after a failed audit write; such
	// a denial cannot itself be recorded, but the name is shared.
	AuditUnavailable Reason = "audit_unavailable"
	Refused          Reason = "refused" // the owner refused the approval
	Expired          Reason = "expired" // the approval expired unanswered
	// MCPUnpinned: the MCP tool's server is not declared, has no pin for
	// its image, does not list the tool, or the mcp directory is invalid.
	MCPUnpinned Reason = "mcp_unpinned"
)

// Reasons lists every reason in the order they were added.
var Reasons = []Reason{NoGrant, DenyGrant, GrantsInvalid, StateUnreadable, InvalidArguments, AuditUnavailable, Refused, Expired, MCPUnpinned}

// Answer is how an ask decision was answered.
type Answer string

// The answers.
const (
	AnswerApproved Answer = "approved"
	AnswerRefused  Answer = "refused" // the owner refused
	AnswerExpired  Answer = "expired" // nobody answered in time
)

// Damage is what was wrong with a recovered line.
type Damage string

// The kinds of damage.
const (
	Torn        Damage = "torn"        // the line had no final newline
	Unparseable Damage = "unparseable" // a complete line that ParseLine refuses
)

// Action is what the writer did about a damaged line.
type Action string

// The actions.
const (
	EndedLine Action = "ended_line" // appended the missing newline, nothing else
	NoAction  Action = "none"       // left it as it is
)

var (
	outcomes = []Outcome{Allowed, Ask, Denied}
	answers  = []Answer{AnswerApproved, AnswerRefused, AnswerExpired}
	damages  = []Damage{Torn, Unparseable}
	actions  = []Action{EndedLine, NoAction}
)

func textOf[T ~string](known []T, what string, v T) ([]byte, error) {
	if !slices.Contains(known, v) {
		return nil, fmt.Errorf("unknown %s %q", what, string(v))
	}
	return []byte(v), nil
}

func parseText[T ~string](known []T, what string, b []byte, v *T) error {
	if !slices.Contains(known, T(b)) {
		return fmt.Errorf("unknown %s %q", what, b)
	}
	*v = T(b)
	return nil
}

// MarshalText and UnmarshalText refuse values this version does not know.
func (o Outcome) MarshalText() ([]byte, error)  { return textOf(outcomes, "outcome", o) }
func (o *Outcome) UnmarshalText(b []byte) error { return parseText(outcomes, "outcome", b, o) }
func (r Reason) MarshalText() ([]byte, error)   { return textOf(Reasons, "denial reason", r) }
func (r *Reason) UnmarshalText(b []byte) error  { return parseText(Reasons, "denial reason", b, r) }
func (a Answer) MarshalText() ([]byte, error)   { return textOf(answers, "answer", a) }
func (a *Answer) UnmarshalText(b []byte) error  { return parseText(answers, "answer", b, a) }
func (d Damage) MarshalText() ([]byte, error)   { return textOf(damages, "damage", d) }
func (d *Damage) UnmarshalText(b []byte) error  { return parseText(damages, "damage", b, d) }
func (a Action) MarshalText() ([]byte, error)   { return textOf(actions, "action", a) }
func (a *Action) UnmarshalText(b []byte) error  { return parseText(actions, "action", b, a) }

func errf(format string, args ...any) error  { return fmt.Errorf(format, args...) }
func unknown[T ~string](known []T, v T) bool { return !slices.Contains(known, v) }
func (g *GrantRef) valid() bool              { return text(g.ID) == nil && IsHash(g.SHA256) }
func (r *Decision) validate() error          { return r.Record.Validate() }

// checkRef checks that an approval or result names an earlier record.
func checkRef(seq, decision int64, what string) error {
	if decision < 1 || decision >= seq {
		return errf("%s names decision %d, which is not an earlier record", what, decision)
	}
	return nil
}

// text checks a short free-text field: non-empty, valid UTF-8, one line
// with no control or line-separator characters.
func text(s string) error {
	if s == "" {
		return errors.New("is empty")
	}
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, c := range s {
		if unicode.IsControl(c) || c == '\u2028' || c == '\u2029' {
			return fmt.Errorf("contains the control character %U", c)
		}
	}
	return nil
}

// Validate reports whether r is a record the log may hold.
func (r *DecisionRecord) Validate() error {
	if err := text(r.Session); err != nil {
		return errf("session %w", err)
	}
	if !utf8.ValidString(r.Tool) {
		return errf("tool is not valid UTF-8")
	}
	if r.Tool == toolset.CallTool && (r.Outcome != Denied || r.Reason != InvalidArguments) {
		return errf(`tool is "call_tool": record the target tool, not the meta-tool`)
	}
	if len(r.Arguments) == 0 || !json.Valid(r.Arguments) {
		return errf("arguments are not JSON")
	}
	if r.Allowance < 0 || (r.Allowance > 0 && r.Outcome != Allowed) {
		return errf("allowance %d on outcome %s: only an allowed call names the allowance that decided it", r.Allowance, r.Outcome)
	}
	return r.Verdict.check()
}

// check checks an outcome with its reason, detail, grant and taint.
func (v *Verdict) check() error {
	o, reason, detail, g, taint := v.Outcome, v.Reason, v.Detail, v.Grant, v.Taint
	if unknown(outcomes, o) {
		return errf("unknown outcome %q", string(o))
	}
	if (o == Denied) != (reason != "") {
		return errf("outcome %s with reason %q: a reason goes with a denial, and only there", o, string(reason))
	}
	if reason != "" && unknown(Reasons, reason) {
		return errf("unknown denial reason %q", string(reason))
	}
	if detail != "" {
		if o != Denied {
			return errf("outcome %s has a detail: only a denial carries one", o)
		}
		if err := text(detail); err != nil {
			return errf("detail %w", err)
		}
		if n := utf8.RuneCountInString(detail); n > MaxDetail {
			return errf("detail is %d characters, over %d", n, MaxDetail)
		}
	}
	switch {
	case g != nil && !g.valid():
		return errf("grant needs an id and a hex SHA-256")
	case reason == NoGrant && g != nil:
		return errf("a no_grant denial names a grant")
	case reason == DenyGrant && g == nil:
		return errf("a deny_grant denial names no grant")
	}
	if !taint.Valid() || taint < dataclass.Floor {
		return errf("taint %v: a session's taint is private or secret", taint)
	}
	return nil
}

func (r *Approval) validate() error {
	if err := checkRef(r.Seq, r.Decision, "approval"); err != nil {
		return err
	}
	switch r.Answer {
	case AnswerApproved:
		if r.Outcome == Ask || r.Reason == Refused || r.Reason == Expired {
			return errf("an approved call re-decides to allowed or to a policy denial, not %s %s", r.Outcome, string(r.Reason))
		}
	case AnswerRefused, AnswerExpired:
		if r.Outcome != Denied || string(r.Reason) != string(r.Answer) {
			return errf("a %s approval is denied with reason %s", r.Answer, string(r.Answer))
		}
	default:
		return errf("unknown answer %q", string(r.Answer))
	}
	return r.Verdict.check()
}

func (r *Result) validate() error {
	if err := checkRef(r.Seq, r.Decision, "result"); err != nil {
		return err
	}
	switch {
	case !IsHash(r.SHA256):
		return errf("result sha256 %q is not a lowercase hex SHA-256", r.SHA256)
	case r.Size < 0:
		return errf("result size %d is negative", r.Size)
	case !r.Class.Valid():
		return errf("result class %v", r.Class)
	case r.MCPPin != "" && !IsHash(r.MCPPin):
		return errf("result mcp_pin %q is not a lowercase hex SHA-256", r.MCPPin)
	}
	return nil
}

func (r *Recovery) validate() error {
	switch {
	case !IsLogName(r.File):
		return errf("recovery file %q is not an audit log name", r.File)
	case r.Line < 1:
		return errf("recovery line %d: want 1 or more", r.Line)
	case unknown(damages, r.Damage) || unknown(actions, r.Action):
		return errf("recovery damage %q, action %q", string(r.Damage), string(r.Action))
	case r.Damage == Unparseable && r.Action != NoAction:
		return errf("an unparseable line is left as it is (action none)")
	case !IsHash(r.SHA256) || r.Size < 0:
		return errf("recovery needs the damaged line's hex SHA-256 and size")
	}
	return nil
}

func (r *AcceptedBreak) validate() error {
	switch {
	case !IsLogName(r.File):
		return errf("accepted_break file %q is not an audit log name", r.File)
	case r.Line < 1:
		return errf("accepted_break line %d: want 1 or more", r.Line)
	case !IsHash(r.LastGood):
		return errf("accepted_break last_good %q is not a lowercase hex SHA-256", r.LastGood)
	}
	return nil
}
