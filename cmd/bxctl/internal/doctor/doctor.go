// Package doctor is `bxctl doctor`: a self-audit of a configured or
// running Boxmaker installation, one finding per check, each with a
// stable id, a severity and the runbook entry that says what to do.
//
// Invariants:
//   - it only reads: it never writes a file, never starts a process or a
//     container, and never sends a completion to the model (the serving
//     check reads /health, /props and /slots only);
//   - it never hangs: every probe of something outside this process
//     (Podman's API, llama-server) runs under a deadline of its own, and
//     all of them under an overall one, so a service that accepts and
//     never answers ends in a finding, not a hung doctor;
//   - it never reports a check as ok that it could not make: a check
//     that could not look is a problem (or, where nothing is configured
//     to look at, says so);
//   - each finding's id is the anchor of its runbook entry
//     (docs/runbook.md#<id>), and [Checks] lists every id it can report.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// Severity is how bad a finding is.
type Severity string

// The severities, best first.
const (
	OK      Severity = "ok"
	Warn    Severity = "warn"
	Problem Severity = "problem"
)

// Finding is one check's outcome.
type Finding struct {
	ID       string   `json:"id"`       // stable, kebab-case; the runbook anchor
	Severity Severity `json:"severity"` //
	Message  string   `json:"message"`  // what was seen, with the figures
	Runbook  string   `json:"runbook"`  // "see docs/runbook.md#<id>"
}

// The finding ids, each with its runbook pointer spelled out so that
// checks/arch (TestRepoRunbook) sees every entry doctor points at.
var Checks = map[string]string{
	"doctor-config":        "see docs/runbook.md#doctor-config",
	"doctor-layout":        "see docs/runbook.md#doctor-layout",
	"doctor-role-uids":     "see docs/runbook.md#doctor-role-uids",
	"doctor-grants":        "see docs/runbook.md#doctor-grants",
	"doctor-secrets":       "see docs/runbook.md#doctor-secrets",
	"doctor-egress":        "see docs/runbook.md#doctor-egress",
	"doctor-podman":        "see docs/runbook.md#doctor-podman",
	"doctor-tool-image":    "see docs/runbook.md#doctor-tool-image",
	"doctor-podman-limits": "see docs/runbook.md#doctor-podman-limits",
	"doctor-serving":       "see docs/runbook.md#doctor-serving",
	"doctor-audit-chain":   "see docs/runbook.md#doctor-audit-chain",
	"doctor-audit-anchor":  "see docs/runbook.md#doctor-audit-anchor",
	"doctor-consult-log":   "see docs/runbook.md#doctor-consult-log",
	"doctor-identity":      "see docs/runbook.md#doctor-identity",
}

// Options is what one audit looks at.
type Options struct {
	State string // the state directory, absolute
	// Anchors returns the owner's anchors of the audit log in dir (bxctl
	// reads them from the owner's anchors file).
	Anchors func(dir string) ([]audit.Anchor, error)
	// Probe bounds each probe of a service; Total bounds them all.
	Probe, Total time.Duration
	// Now is the time anchors' ages are measured against.
	Now time.Time
}

// Defaults for [Options].
const (
	DefaultProbe = 5 * time.Second
	DefaultTotal = 30 * time.Second
	// AnchorMaxAge is the age past which the newest anchor is a warning:
	// an anchor older than a week leaves a week of the log that brokerd's
	// uid could rewrite unseen.
	AnchorMaxAge = 7 * 24 * time.Hour
)

// Report is every finding of one audit, in the order the checks ran.
type Report struct {
	Findings []Finding `json:"findings"`
}

// Exit codes of `bxctl doctor`.
const (
	ExitClean    = 0 // every finding ok
	ExitWarnings = 1 // warnings, no problems
	ExitProblems = 2 // at least one problem
	ExitBroken   = 3 // the doctor itself could not run
)

// Exit is the report's exit code.
func (r Report) Exit() int {
	code := ExitClean
	for _, f := range r.Findings {
		switch f.Severity {
		case Problem:
			return ExitProblems
		case Warn:
			code = ExitWarnings
		}
	}
	return code
}

// Find returns the first finding with id, if any.
func (r Report) Find(id string) (Finding, bool) {
	for _, f := range r.Findings {
		if f.ID == id {
			return f, true
		}
	}
	return Finding{}, false
}

// auditor collects findings; each check adds through it.
type auditor struct {
	opt      Options
	ctx      context.Context // the overall bound
	findings []Finding
}

func (a *auditor) add(id string, sev Severity, format string, args ...any) {
	ptr, ok := Checks[id]
	if !ok {
		panic("doctor: finding id " + id + " is not in Checks") // TestChecksHaveEntries
	}
	a.findings = append(a.findings, Finding{ID: id, Severity: sev, Message: fmt.Sprintf(format, args...), Runbook: ptr})
}

// probe is a context for one probe: its own deadline inside the overall.
func (a *auditor) probe() (context.Context, context.CancelFunc) {
	return context.WithTimeout(a.ctx, a.opt.Probe)
}

// Run audits the installation in opt.State. An error means the doctor
// could not run at all (no state directory to audit): exit 3.
func Run(ctx context.Context, opt Options) (Report, error) {
	if opt.Probe <= 0 {
		opt.Probe = DefaultProbe
	}
	if opt.Total <= 0 {
		opt.Total = DefaultTotal
	}
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	if opt.Anchors == nil {
		opt.Anchors = func(string) ([]audit.Anchor, error) { return nil, nil }
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Total)
	defer cancel()
	in, err := readInstall(opt.State)
	if err != nil {
		return Report{}, err
	}
	a := &auditor{opt: opt, ctx: ctx}
	a.configs(in)
	a.layout(opt.State)
	a.roleUIDs(in)
	set := a.grants(in)
	a.secrets(in)
	a.egress(in, set)
	a.podman(in)
	a.serving(in)
	a.auditLog(in)
	a.identity(in)
	return Report{Findings: a.findings}, nil
}

// WriteText prints one line per finding, escaped (messages can quote
// file names and server answers), with the runbook pointer on all but
// ok findings.
func (r Report) WriteText(w io.Writer) {
	for _, f := range r.Findings {
		line := fmt.Sprintf("%-7s %-20s %s", f.Severity, f.ID, f.Message)
		if f.Severity != OK {
			line += "; " + f.Runbook
		}
		fmt.Fprintln(w, escape.Line(line))
	}
}

// WriteJSON prints the report as one JSON document, with the exit code.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	findings := r.Findings
	if findings == nil {
		findings = []Finding{}
	}
	return enc.Encode(struct {
		Findings []Finding `json:"findings"`
		Exit     int       `json:"exit"`
	}{findings, r.Exit()})
}
