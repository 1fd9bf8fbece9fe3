package ledger

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Session allowances (policy rule 10) live in the ledger, under its lock,
// because each is authority recorded in the audit log: made by an
// [audit.Allowance] record, ended by an [audit.AllowanceEnd], and the
// live set is exactly the log's allowances not ended ([liveAllowances],
// read at every [Open]). A decision sees the live set under the same lock
// that writes it, so a revocation that returned is in force for every
// later decision.

// ErrNoAllowance is an end or revocation of an allowance that is not live.
var ErrNoAllowance = errors.New("no live session allowance has that id")

// Allow records session allowance r, made from the owner's answer to
// approval r.Decision, and makes it live. The approval must have been
// answered through this ledger, approved and re-decided allowed, for
// r.Session; the ledger sets r's Taint, Untrusted and Recalled to the
// session's state now.
func (l *Ledger) Allow(r audit.Allowance) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	oc, ok := l.open[r.Decision]
	if !ok || !oc.approved || oc.session != r.Session {
		return 0, fmt.Errorf("allowance %d: not an approved call of session %s awaiting its result", r.Decision, r.Session)
	}
	if _, dup := l.allow[r.Decision]; dup {
		return 0, fmt.Errorf("allowance %d: already live", r.Decision)
	}
	cur, _, unread := readState(l.dir, r.Session)
	if unread != nil {
		return 0, fmt.Errorf("allowance %d: the session's state is unreadable: %v", r.Decision, unread)
	}
	r.Taint, r.Untrusted, r.Recalled = cur.Taint, cur.Untrusted, cur.Recalled
	seq, err := l.append(&r)
	if err != nil {
		return 0, err
	}
	l.allow[r.Decision] = r
	return seq, nil
}

// EndAllowance records that allowance id ended for reason (by: who
// revoked it, for a revocation) and takes it out of the live set.
func (l *Ledger) EndAllowance(id int64, reason audit.EndReason, by string) (audit.Allowance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return audit.Allowance{}, err
	}
	return l.endLocked(id, reason, by)
}

func (l *Ledger) endLocked(id int64, reason audit.EndReason, by string) (audit.Allowance, error) {
	a, ok := l.allow[id]
	if !ok {
		return audit.Allowance{}, fmt.Errorf("allowance %d: %w", id, ErrNoAllowance)
	}
	if _, err := l.append(&audit.AllowanceEnd{Allowance: id, Reason: reason, By: by}); err != nil {
		return audit.Allowance{}, err
	}
	delete(l.allow, id)
	return a, nil
}

// Allowances returns the live allowances, by id.
func (l *Ledger) Allowances() []audit.Allowance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.allowancesLocked()
}

func (l *Ledger) allowancesLocked() []audit.Allowance {
	out := make([]audit.Allowance, 0, len(l.allow))
	for _, a := range l.allow {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b audit.Allowance) int { return cmp.Compare(a.Decision, b.Decision) })
	return out
}

// AllowingFunc decides a call as [DecideFunc] does, given also the
// session's live allowances of its epoch; it returns the record and the
// allowances that lapsed (policy.Lapse), which the ledger ends first.
type AllowingFunc func(s policy.Session, unreadable error, live []audit.Allowance) (audit.DecisionRecord, []policy.Lapse)

// DecideAllowing is [Ledger.Decide] for a call of session id in epoch:
// the session's allowances of another epoch end (reason epoch) before fn
// sees the rest, and the ones fn says lapsed end before the decision is
// appended. A decision naming an allowance must name a live one.
func (l *Ledger) DecideAllowing(id string, epoch int64, fn AllowingFunc) (int64, error) {
	if err := wire.CheckSessionID(id); err != nil {
		return 0, fmt.Errorf("decide: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	var live []audit.Allowance
	for _, a := range l.allowancesLocked() {
		if a.Session != id {
			continue
		}
		if a.Epoch != epoch {
			if _, err := l.endLocked(a.Decision, audit.EndEpoch, ""); err != nil {
				return 0, err
			}
			continue
		}
		live = append(live, a)
	}
	var lapsed []policy.Lapse
	seq, err := l.decideLocked(id, func(s policy.Session, unreadable error) audit.DecisionRecord {
		var rec audit.DecisionRecord
		rec, lapsed = fn(s, unreadable, live)
		return rec
	}, func(rec *audit.DecisionRecord) error {
		for _, lp := range lapsed {
			if _, err := l.endLocked(lp.ID, lp.Reason, ""); err != nil && !errors.Is(err, ErrNoAllowance) {
				return err
			}
		}
		if _, ok := l.allow[rec.Allowance]; rec.Allowance != 0 && (!ok || l.allow[rec.Allowance].Session != id) {
			return fmt.Errorf("decide: allowance %d is not live for session %s", rec.Allowance, id)
		}
		return nil
	})
	return seq, err
}

// liveAllowances folds the audit log's allowance records: those made and
// not ended.
func liveAllowances(auditDir string) (map[int64]audit.Allowance, error) {
	entries, err := os.ReadDir(auditDir)
	if err != nil {
		return nil, err
	}
	live := map[int64]audit.Allowance{}
	for _, e := range entries {
		if !audit.IsLogName(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		err := scanLog(filepath.Join(auditDir, e.Name()), func(r audit.Record) {
			switch r := r.(type) {
			case *audit.Allowance:
				live[r.Decision] = *r
			case *audit.AllowanceEnd:
				delete(live, r.Allowance)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return live, nil
}

// ScanDecisions passes every decision record of the audit log in auditDir
// to fn, in order (a read of the files, beside the writer: only complete
// lines are read).
func ScanDecisions(auditDir string, fn func(*audit.Decision)) error {
	entries, err := os.ReadDir(auditDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !audit.IsLogName(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		err := scanLog(filepath.Join(auditDir, e.Name()), func(r audit.Record) {
			if d, ok := r.(*audit.Decision); ok {
				fn(d)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}
