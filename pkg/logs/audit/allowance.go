package audit

import (
	"fmt"
	"slices"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// A session allowance is new authority made from an owner's answer
// (`!approve ID CODE session`): later calls of one session and epoch that
// fall inside the approved call's exact [Scope] are decided allowed
// without asking. Its whole life is in this log, so brokerd rebuilds the
// live allowances from it after a restart: an [Allowance] record when it
// is made (after the approval record of the same answer), an
// [AllowanceEnd] when it ends, and every decision it made names it
// ([DecisionRecord.Allowance]).

// Scope is exactly what a session allowance covers: one tool and, by
// tool, the file (or with Dir the file's directory), the host, or the
// command line and working directory. Nothing else is ever covered; a
// consult never is (each payload is seen).
type Scope struct {
	Tool    string `json:"tool"`
	Path    string `json:"path,omitempty"`    // read_file, write_file: the file, or with Dir its directory
	Dir     bool   `json:"dir,omitempty"`     // read_file, write_file: Path is a directory (the owner said `session dir`)
	Host    string `json:"host,omitempty"`    // http_fetch: the host, exactly
	Command string `json:"command,omitempty"` // shell: the command line, exactly
	Workdir string `json:"workdir,omitempty"` // shell: the working directory, exactly
}

// Check reports whether s names one tool and exactly the fields that
// tool's scope takes.
func (s Scope) Check() error {
	file, host, sh := s.Path != "", s.Host != "", s.Command != "" || s.Workdir != ""
	switch s.Tool {
	case toolset.ReadFile, toolset.WriteFile:
		if !file || host || sh {
			return errf("a %s scope names a path and nothing else", s.Tool)
		}
	case toolset.HTTPFetch:
		if !host || file || sh || s.Dir {
			return errf("an http_fetch scope names a host and nothing else")
		}
	case toolset.Shell:
		if s.Command == "" || s.Workdir == "" || file || host || s.Dir {
			return errf("a shell scope names a command and a workdir and nothing else")
		}
	default:
		return errf("no session allowance can cover tool %q", s.Tool)
	}
	for _, f := range []string{s.Path, s.Host, s.Workdir} {
		if f != "" {
			if err := text(f); err != nil {
				return errf("scope %w", err)
			}
		}
	}
	return nil
}

// Allowance records a session allowance made from the owner's answer to
// approval Decision (the ask decision's seq, which is also the
// allowance's id). Grant and Matched are the grants it rides on, by id
// and hash: when any of them changes it ends. Taint, Untrusted and
// Recalled are the session's state when it was made: a session above
// them is not covered.
type Allowance struct {
	Seq       int64           `json:"seq"`
	Time      string          `json:"time"`
	Prev      string          `json:"prev"`
	Decision  int64           `json:"decision"`
	Session   string          `json:"session"`
	Epoch     int64           `json:"epoch"`
	Scope     Scope           `json:"scope"`
	Grant     GrantRef        `json:"grant"`
	Matched   []GrantRef      `json:"matched"`
	Approver  string          `json:"approver,omitempty"`
	Taint     dataclass.Class `json:"taint"`
	Untrusted bool            `json:"untrusted"`
	Recalled  bool            `json:"recalled"`
}

// EndReason is why an allowance ended. The list is append-only.
type EndReason string

// The reasons an allowance ends.
const (
	EndRevoked      EndReason = "revoked"       // the owner revoked it (!revoke, bxctl allowances revoke)
	EndEpoch        EndReason = "epoch"         // the session's epoch changed (compaction, a new session log)
	EndGrantChanged EndReason = "grant_changed" // a grant it rode on changed or went
	EndTainted      EndReason = "tainted"       // the session became untrusted or more tainted
	EndExpired      EndReason = "expired"       // it reached its longest life
)

// EndReasons lists every reason in the order they were added.
var EndReasons = []EndReason{EndRevoked, EndEpoch, EndGrantChanged, EndTainted, EndExpired}

// MarshalText and UnmarshalText refuse reasons this version does not know.
func (r EndReason) MarshalText() ([]byte, error) {
	return textOf(EndReasons, "allowance end reason", r)
}
func (r *EndReason) UnmarshalText(b []byte) error {
	return parseText(EndReasons, "allowance end reason", b, r)
}

// AllowanceEnd records that allowance Allowance ended, and why. By names
// who revoked it, for a revocation.
type AllowanceEnd struct {
	Seq       int64     `json:"seq"`
	Time      string    `json:"time"`
	Prev      string    `json:"prev"`
	Allowance int64     `json:"allowance"`
	Reason    EndReason `json:"reason"`
	By        string    `json:"by,omitempty"`
}

func (*Allowance) Tag() string    { return "allowance" }
func (*AllowanceEnd) Tag() string { return "allowance_end" }

func (r *Allowance) Head() Header    { return Header{r.Seq, r.Time, r.Prev} }
func (r *AllowanceEnd) Head() Header { return Header{r.Seq, r.Time, r.Prev} }

func (r *Allowance) setHead(h Header)    { r.Seq, r.Time, r.Prev = h.Seq, h.Time, h.Prev }
func (r *AllowanceEnd) setHead(h Header) { r.Seq, r.Time, r.Prev = h.Seq, h.Time, h.Prev }

func (r *Allowance) validate() error {
	if err := checkRef(r.Seq, r.Decision, "allowance"); err != nil {
		return err
	}
	if err := text(r.Session); err != nil {
		return errf("session %w", err)
	}
	if r.Epoch < 0 {
		return errf("epoch %d is negative", r.Epoch)
	}
	if err := r.Scope.Check(); err != nil {
		return err
	}
	if !r.Grant.valid() {
		return errf("grant needs an id and a hex SHA-256")
	}
	if !slices.ContainsFunc(r.Matched, func(g GrantRef) bool { return g == r.Grant }) {
		return errf("matched does not hold the grant %q it rides on", r.Grant.ID)
	}
	for _, g := range r.Matched {
		if !g.valid() {
			return errf("a matched grant needs an id and a hex SHA-256")
		}
	}
	if r.Approver != "" {
		if err := text(r.Approver); err != nil {
			return errf("approver %w", err)
		}
	}
	if !r.Taint.Valid() || r.Taint < dataclass.Floor {
		return errf("taint %v: a session's taint is private or secret", r.Taint)
	}
	return nil
}

func (r *AllowanceEnd) validate() error {
	if err := checkRef(r.Seq, r.Allowance, "allowance_end"); err != nil {
		return err
	}
	if unknown(EndReasons, r.Reason) {
		return fmt.Errorf("unknown allowance end reason %q", string(r.Reason))
	}
	if r.By != "" {
		if err := text(r.By); err != nil {
			return errf("by %w", err)
		}
	}
	return nil
}
