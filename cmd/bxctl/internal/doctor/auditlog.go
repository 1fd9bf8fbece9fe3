package doctor

import (
	"path/filepath"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
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
		var first error
		if p := e.Problem; p != nil {
			shown := *p
			if shown.File != "" {
				shown.File = filepath.Join(dir, shown.File)
			}
			first = &shown
		}
		a.add("doctor-audit-chain", Problem, "%s", joinProblems(first, e.HeadProblem, e.AnchorProblems))
		return
	}
	a.add("doctor-audit-chain", OK, "%s", e.Summary())
	a.consultLog(in.broker.StateDir, dir)
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

// consultLog checks the consult log beside the audit log as `bxctl audit
// verify` does (chain, links to the audit log, brokerd's head record
// broker/consult.head, the owner's anchors of it).
func (a *auditor) consultLog(state, auditDir string) {
	dir := layout.ConsultLog.In(state)
	key := dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		key = real
	}
	anchors, err := a.opt.Anchors(key)
	if err != nil {
		a.add("doctor-consult-log", Problem, "the owner's anchors do not read: %v", err)
		return
	}
	e := consultlog.VerifyEnd(dir, auditDir, anchors)
	switch {
	case e.OK() && e.Lines == 0:
		a.add("doctor-consult-log", OK, "the consult log is empty: no consult has been sent")
		return
	case e.OK():
		a.add("doctor-consult-log", OK, "the consult log: %d requests, %d responses, ends at brokerd's head record (seq %d)", e.Requests, e.Responses, e.HeadSeq)
		return
	}
	var first error
	if p := e.Problem; p != nil {
		shown := *p
		shown.File = filepath.Join(dir, shown.File)
		first = &shown
	}
	a.add("doctor-consult-log", Problem, "%s", joinProblems(first, e.HeadProblem, e.AnchorProblems))
}

// joinProblems is one finding's message for a log that fails: its
// chain's first problem (with its path), its head's, and every anchor it
// fails, each ending with its own runbook entry.
func joinProblems(first, head error, anchors []*audit.AnchorError) string {
	var ps []string
	for _, err := range []error{first, head} {
		if err != nil {
			ps = append(ps, err.Error())
		}
	}
	for _, ap := range anchors {
		ps = append(ps, ap.Error())
	}
	return strings.Join(ps, "; ")
}
