package policy

import (
	"errors"
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// # Session allowances (rule 10)
//
// An owner's `!approve ID CODE session` makes a session allowance: later
// calls of the same session and epoch that an ask grant would hold for
// the owner are decided allowed without asking when they fall inside the
// approved call's exact scope ([ScopeOf]):
//
//   - read_file, write_file: the same path; with `session dir`, any file
//     directly in the approved file's directory (never in a
//     subdirectory);
//   - http_fetch: the same host, exactly;
//   - shell: the same command line, byte for byte, in the same working
//     directory. Never a pattern: `env sh -c LINE`, `bash -lc LINE`,
//     `/usr/bin/time LINE`, `nice LINE` or `timeout 5 LINE` are other
//     lines and ask again;
//   - consult: never (the owner reads each payload).
//
// An allowance only ever turns an ask into allowed: a deny grant, no
// grant, an expired grant or a taint above a grant's max_taint decide
// before it is looked at. It no longer decides ([Lapse]) once the grant
// it rode on, or any grant applicable to the call, differs from when it
// was made (by id and hash), or the session is more tainted, untrusted or
// recalled than then. The caller (brokerd) keeps the table, limits it to
// the session and epoch, and ends lapsed allowances in the audit log.

// MaxAllowanceAge is an allowance's longest life, whatever else happens:
// an epoch of a busy session can last days, and an owner's "for this
// session" should not outlive the owner's memory of saying it.
const MaxAllowanceAge = 12 * time.Hour

// Allowed is one live session allowance as brokerd holds it: made only
// from an owner's answer that carried the approval's code.
type Allowed struct {
	ID      int64 // the approval it was made from
	Scope   audit.Scope
	Grant   GrantRef   // the ask grant the approved call matched
	Matched []GrantRef // every grant applicable to the approved call
	State   Session    // the session's state when it was made
	Made    time.Time
}

// Lapse is an allowance that can no longer decide anything.
type Lapse struct {
	ID     int64
	Reason audit.EndReason
}

// ErrNoSessionScope is a `session` answer for a call no allowance can
// cover.
var ErrNoSessionScope = errors.New("no session allowance can cover this call")

// ScopeOf is the exact scope a session allowance made from ask covers;
// dir widens a file's scope to the file's directory. A consult, and dir
// for any tool but read_file and write_file, are refused.
func ScopeOf(ask *Ask, dir bool) (audit.Scope, error) {
	s := audit.Scope{Tool: ask.Tool}
	switch a := ask.Args.(type) {
	case toolargs.ReadFile:
		s.Path, s.Dir = a.Path.String(), dir
	case toolargs.WriteFile:
		s.Path, s.Dir = a.Path.String(), dir
	case toolargs.HTTPFetch:
		s.Host = a.URL.Host().String()
	case toolargs.Shell:
		s.Command, s.Workdir = a.Command, a.Workdir.String()
	case toolargs.Consult:
		return audit.Scope{}, fmt.Errorf("%w: a consult's every payload is read by the owner; see docs/runbook.md#allowance-refused", ErrNoSessionScope)
	default:
		return audit.Scope{}, fmt.Errorf("%w: %s; see docs/runbook.md#allowance-refused", ErrNoSessionScope, ask.Tool)
	}
	if dir {
		switch a := ask.Args.(type) {
		case toolargs.ReadFile:
			s.Path = a.Path.Dir().String()
		case toolargs.WriteFile:
			s.Path = a.Path.Dir().String()
		default:
			return audit.Scope{}, fmt.Errorf("%w: `session dir` is for read_file and write_file only; see docs/runbook.md#allowance-refused", ErrNoSessionScope)
		}
	}
	return s, s.Check()
}

// Covers reports whether scope s covers a call with arguments a.
func Covers(s audit.Scope, a toolargs.Args) bool {
	if a == nil || s.Tool != a.Tool() {
		return false
	}
	switch a := a.(type) {
	case toolargs.ReadFile:
		return fileCovered(s, a.Path)
	case toolargs.WriteFile:
		return fileCovered(s, a.Path)
	case toolargs.HTTPFetch:
		return a.URL.Host().String() == s.Host
	case toolargs.Shell:
		return a.Command == s.Command && a.Workdir.String() == s.Workdir
	}
	return false
}

// fileCovered: the path itself, or with Dir a file directly in the
// directory (never in a subdirectory: "this directory" is what the owner
// read in the approval post, and nothing deeper).
func fileCovered(s audit.Scope, p toolargs.Path) bool {
	if s.Dir {
		return p.Dir().String() == s.Path && p.String() != s.Path
	}
	return p.String() == s.Path
}

// Lapsed reports whether allowance al can never decide again, and why:
// it reached [MaxAllowanceAge], the grant it rode on is gone or changed
// (by hash or mode), or the session is more tainted, untrusted or
// recalled than when it was made. An invalid grant set lapses nothing:
// every call is denied meanwhile, and the owner may be mid-edit.
func Lapsed(gs *grant.Set, s Session, now time.Time, al Allowed) (audit.EndReason, bool) {
	if !now.Before(al.Made.Add(MaxAllowanceAge)) {
		return audit.EndExpired, true
	}
	if above(effective(s), al.State) {
		return audit.EndTainted, true
	}
	if !gs.Valid() {
		return "", false
	}
	for _, g := range gs.Grants() {
		if g.ID() == al.Grant.ID {
			if g.SHA256() != al.Grant.SHA256 || g.Mode() != grant.Ask {
				return audit.EndGrantChanged, true
			}
			return "", false
		}
	}
	return audit.EndGrantChanged, true
}

// DecideAllowing is [Decide] with the session's live allowances (already
// limited to its session and epoch by the caller). Every allowance that
// [Lapsed] is returned as lapsed and decides nothing; an ask one of the
// others covers becomes a Decision naming it ([Decision.Allowance]),
// unless the grants applicable to the call differ from those of the
// approved call (then that allowance lapsed too, grant_changed). A
// consult is never decided by an allowance.
func DecideAllowing(gs *grant.Set, req Request, s Session, now time.Time, live []Allowed) (Decision, *Ask, *Denial, []Lapse) {
	var lapsed, usable = []Lapse(nil), []Allowed(nil)
	for _, al := range live {
		if why, ok := Lapsed(gs, s, now, al); ok {
			lapsed = append(lapsed, Lapse{al.ID, why})
		} else {
			usable = append(usable, al)
		}
	}
	dec, ask, den := Decide(gs, req, s, now)
	if ask == nil || ask.Tool == toolset.Consult {
		return dec, ask, den, lapsed
	}
	for _, al := range usable {
		if !Covers(al.Scope, ask.Args) {
			continue
		}
		if !sameGrants(al, ask) {
			lapsed = append(lapsed, Lapse{al.ID, audit.EndGrantChanged})
			continue
		}
		v, d := evaluate(gs, req, s, now)
		if d != nil || v.mode != grant.Ask { // cannot differ: the same inputs as Decide's
			break
		}
		return Decision{&decision{verdict: *v, allowance: al.ID}}, nil, nil, lapsed
	}
	return dec, ask, den, lapsed
}

func sameGrants(al Allowed, ask *Ask) bool {
	key := func(r GrantRef) string { return r.ID + " " + r.SHA256 }
	if key(al.Grant) != key(ask.Grant) || len(al.Matched) != len(ask.Matched) {
		return false
	}
	for i := range al.Matched {
		if key(al.Matched[i]) != key(ask.Matched[i]) {
			return false
		}
	}
	return true
}

// above reports whether session state now is more tainted, untrusted or
// recalled than state then.
func above(now, then Session) bool {
	now, then = effective(now), effective(then)
	return !now.Taint.AtMost(then.Taint) || (now.Untrusted && !then.Untrusted) || (now.Recalled && !then.Recalled)
}

// Allowance is the id of the session allowance that decided d without
// asking, or 0.
func (d Decision) Allowance() int64 { return d.get().allowance }
