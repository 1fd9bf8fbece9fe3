package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// Reason says why a call was denied. The list is append-only: records
// and peers of other versions read it.
type Reason string

// The reasons.
const (
	GrantsInvalid    Reason = "grants_invalid"    // the grant directory is invalid: every call is denied
	UnknownTool      Reason = "unknown_tool"      // no tool of that name can be granted
	InvalidArguments Reason = "invalid_arguments" // the arguments did not parse; Detail says why
	NoGrant          Reason = "no_grant"          // no applicable grant allows the call
	DeniedByGrant    Reason = "denied_by_grant"   // a deny grant matched; Grant names it
)

// Denial is a refused call. It is an error whose text is for the owner
// and ends with its runbook pointer.
type Denial struct {
	Reason      Reason
	Tool        string // call_tool's target when it could be read, else the tool called
	ViaCallTool bool
	Target      string     // the path, workdir or URL, when the arguments parsed
	Detail      string     // invalid_arguments: one line for the model, at most MaxDetail bytes
	Grant       *GrantRef  // denied_by_grant: the winning deny grant and its hash
	Matched     []GrantRef // the applicable grants, sorted by id
	Expired     int        // no_grant and denied_by_grant: grants that would have matched but expired
	AboveTaint  int        // ... whose max_taint is below the session's taint
	Session     Session
	At          time.Time
}

func (d *Denial) Error() string {
	if msg, ok := consultError(d); ok {
		return msg
	}
	if msg, ok := postFileError(d); ok {
		return msg
	}
	if msg, ok := remoteHostError(d); ok {
		return msg
	}
	switch {
	case d.Reason == GrantsInvalid:
		return fmt.Sprintf("%q denied: the grants are invalid, so every call is denied until they are fixed; see docs/runbook.md#grants-invalid", d.Tool)
	case d.Reason == UnknownTool:
		return fmt.Sprintf("%q denied: no tool of that name can be granted; see docs/runbook.md#no-grant", d.Tool)
	case d.Reason == InvalidArguments:
		return fmt.Sprintf("%q denied: invalid arguments: %s; see docs/runbook.md#invalid-arguments", d.Tool, d.Detail)
	case d.Reason == MCPUnpinned:
		return fmt.Sprintf("%q denied: %s, so it is never started; the owner pins a server with bxctl mcp pin; see docs/runbook.md#mcp-unpinned", d.Tool, d.Detail)
	case d.Reason == DeniedByGrant && d.Grant != nil:
		return fmt.Sprintf("%q on %q denied by grant %q (%s, sha256 %s); see docs/runbook.md#denied-by-grant", d.Tool, d.Target, d.Grant.ID, d.Grant.File, d.Grant.SHA256)
	}
	return fmt.Sprintf("%q on %q denied: no grant allows it at session taint %s (%d expired, %d with a lower max_taint); see docs/runbook.md#no-grant",
		d.Tool, d.Target, d.Session.Taint, d.Expired, d.AboveTaint)
}

// Record is the Denial's summary for the audit log.
func (d *Denial) Record() Record {
	return Record{Outcome: "denied", Reason: d.Reason, Detail: d.Detail, Tool: d.Tool, ViaCallTool: d.ViaCallTool,
		Target: d.Target, Grant: d.Grant, Matched: slices.Clone(d.Matched), Expired: d.Expired,
		AboveTaint: d.AboveTaint, Session: d.Session, At: d.At}
}

// Record is the plain summary of one decision for the audit log: every
// request gets one (allowed, ask or denied, including grants_invalid).
// It carries no argument content: the arguments are named by the SHA-256
// of their wire form, because a write_file's content may hold what the
// session read.
type Record struct {
	Outcome     string     `json:"outcome"` // allowed, ask or denied
	Reason      Reason     `json:"reason,omitempty"`
	Detail      string     `json:"detail,omitempty"`
	Tool        string     `json:"tool"`
	ViaCallTool bool       `json:"via_call_tool"`
	Target      string     `json:"target,omitempty"`
	ArgsSHA256  string     `json:"args_sha256,omitempty"`
	Mode        string     `json:"mode,omitempty"` // the winning grant's mode; "builtin" for the memory tools
	Approved    bool       `json:"approved"`
	Grant       *GrantRef  `json:"grant,omitempty"`
	Matched     []GrantRef `json:"matched,omitempty"`
	Class       string     `json:"class,omitempty"`
	Untrusted   bool       `json:"untrusted"`
	Mounts      []Mount    `json:"mounts,omitempty"`
	Hosts       []string   `json:"hosts,omitempty"`
	Secret      string     `json:"secret,omitempty"` // the secret's name, never its value
	Expired     int        `json:"expired,omitempty"`
	AboveTaint  int        `json:"above_taint,omitempty"`
	Session     Session    `json:"session"`
	At          time.Time  `json:"at"`
}

func (v *verdict) record(outcome string) Record {
	r := Record{Outcome: outcome, Tool: v.tool, ViaCallTool: v.via, Target: target(v.args),
		ArgsSHA256: argsHash(v.args), Mode: v.mode.String(), Matched: slices.Clone(v.matched),
		Class: v.class.String(), Untrusted: v.untrusted, Mounts: slices.Clone(v.mounts), Secret: v.secret, Session: v.session, At: v.at}
	if v.builtin {
		r.Mode = "builtin"
	} else {
		w := v.winner
		r.Grant = &w
	}
	for _, h := range v.hosts {
		r.Hosts = append(r.Hosts, h.String())
	}
	return r
}

func argsHash(a toolargs.Args) string {
	if a == nil {
		return ""
	}
	b, err := a.MarshalJSON()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
