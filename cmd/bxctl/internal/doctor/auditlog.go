package doctor

import (
	"path/filepath"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/audit"
	"wntrmute.dev/boxmaker/pkg/layout"
)

// auditLog verifies the audit chain as `bxctl audit verify` does (the
// chain, brokerd's head record and the owner's anchors), then warns when
// a log with records has no anchor, or its newest is older than
// [AnchorMaxAge]: the owner's anchors are what brokerd's uid cannot
// rewrite.
func (a *auditor) auditLog(in *install) {
	if !in.has("brokerd") || in.broker.StateDir == "" {
		return
	}
	dir := layout.Audit.In(in.broker.StateDir)
	key := dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		key = real
	}
	if err := isDir(dir); err != nil {
		a.add("doctor-audit-chain", Problem, "the audit log: %v", err)
		return
	}
	anchors, err := a.opt.Anchors(key)
	if err != nil {
		a.add("doctor-audit-chain", Problem, "the owner's anchors do not read: %v", err)
		return
	}
	e := audit.VerifyEnd(dir, anchors)
	if !e.OK() {
		var ps []string
		if p := e.Problem; p != nil {
			shown := *p
			if shown.File != "" {
				shown.File = filepath.Join(dir, shown.File)
			}
			ps = append(ps, shown.Error())
		}
		if e.HeadProblem != nil {
			ps = append(ps, e.HeadProblem.Error())
		}
		for _, ap := range e.AnchorProblems {
			ps = append(ps, ap.Error())
		}
		a.add("doctor-audit-chain", Problem, "%s", strings.Join(ps, "; "))
		return
	}
	a.add("doctor-audit-chain", OK, "%s", e.Summary())
	if e.LastSeq == 0 {
		a.add("doctor-audit-anchor", OK, "the log is empty: nothing to anchor yet")
		return
	}
	var newest time.Time
	for _, an := range anchors {
		if t, err := time.Parse(audit.TimeLayout, an.Time); err == nil && t.After(newest) {
			newest = t
		}
	}
	switch age := a.opt.Now.Sub(newest); {
	case newest.IsZero():
		a.add("doctor-audit-anchor", Warn, "the log has %d records and no anchor of yours: bxctl audit anchor %s records one", e.LastSeq, dir)
	case age > AnchorMaxAge:
		a.add("doctor-audit-anchor", Warn, "your newest anchor is from %s, %d days ago: everything after it rests on brokerd's head record alone (bxctl audit anchor %s)", stamp(newest), int(age.Hours()/24), dir)
	default:
		a.add("doctor-audit-anchor", OK, "%d anchors hold, the newest from %s", len(anchors), stamp(newest))
	}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
