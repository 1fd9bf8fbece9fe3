// Package report is `bxctl report` and `bxctl metrics`: what the session
// logs and the audit log say about how the installation has been running,
// and the decision log's rule on the thinking cap applied to it.
//
// Invariants: it reads only sessions/ and broker/audit/, strictly (a
// record that does not decode is an error naming its file and line, never
// skipped); report writes nothing, and metrics writes only its textfile
// ([Report.WriteMetricsFile], atomically); every figure is an integer
// count, token number or microsecond sum, so the JSON has no floats.
package report

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// The decision log's rule (2026-09-26, the thinking cap): revisit once
// CapMinCompletions are logged; raise the cap if more than
// CapRaisePercent of completions hit it.
const (
	CapMinCompletions = 200
	CapRaisePercent   = 5
)

// The verdicts of the cap rule.
const (
	VerdictTooFew = "not enough data"
	VerdictRaise  = "raise the cap"
	VerdictKeep   = "keep the cap"
)

// Report is every figure.
type Report struct {
	Since       string `json:"since"` // RFC 3339, or "" for all
	SessionLogs int    `json:"session_logs"`
	Turns       int    `json:"turns"`
	Completions int    `json:"completions"`
	// Reasoning is reasoning tokens per completion.
	Reasoning Dist `json:"reasoning_tokens"`
	Cap       Cap  `json:"thinking_cap"`
	// Reread is tokens the server re-read beyond the new suffix, per
	// turn (the sum of each completion's cache gap over one).
	Reread      Dist  `json:"reread_tokens_per_turn"`
	CacheLosses int   `json:"cache_losses"`
	CacheLost   int64 `json:"cache_lost_tokens"`
	PrefillUS   int64 `json:"prefill_us"`
	GenerateUS  int64 `json:"generation_us"`
	// Results are the session logs' tool results: tool -> status -> n.
	Results map[string]map[string]int `json:"tool_results"`
	// Decisions are the audit log's decisions: tool -> outcome -> n.
	Decisions map[string]map[string]int `json:"tool_decisions"`
	// Approvals are the audit log's answers to asks: answer -> n, and
	// by who answered (mattermost, admin.sock, none).
	Approvals  map[string]int `json:"approvals"`
	ApprovedBy map[string]int `json:"approvals_by"`
	// Consults: decided (allowed or asked), then ran (a result).
	// Allowances: calls an owner's session allowance allowed without
	// asking, allowances made (from an approval) and ended.
	AllowedByAllowance int `json:"allowed_by_allowance"`
	AllowancesMade     int `json:"allowances_made"`
	AllowancesEnded    int `json:"allowances_ended"`
	ConsultsDecided    int `json:"consults_decided"`
	ConsultsSent       int `json:"consults_sent"`
	AuditRecords       int `json:"audit_records"`
}

// Cap is the thinking cap's figures and the rule's verdict.
type Cap struct {
	Fired int `json:"fired"`
	// PerMille is Fired per thousand completions, rounded down.
	PerMille int    `json:"per_mille"`
	Verdict  string `json:"verdict"`
	Why      string `json:"why"`
}

// Verdict applies the decision log's rule to fired of completions.
func Verdict(fired, completions int) Cap {
	c := Cap{Fired: fired}
	if completions > 0 {
		c.PerMille = fired * 1000 / completions
	}
	switch {
	case completions < CapMinCompletions:
		c.Verdict, c.Why = VerdictTooFew, fmt.Sprintf("%d of the %d completions the rule needs", completions, CapMinCompletions)
	case fired*100 > CapRaisePercent*completions:
		c.Verdict, c.Why = VerdictRaise, fmt.Sprintf("fired on %d of %d completions, over %d%%", fired, completions, CapRaisePercent)
	default:
		c.Verdict, c.Why = VerdictKeep, fmt.Sprintf("fired on %d of %d completions, at most %d%%", fired, completions, CapRaisePercent)
	}
	return c
}

// Collect reads state's session logs and audit log. since, if not zero,
// keeps audit records from then on and session logs last written then or
// later (a session log's records carry no time).
func Collect(state string, since time.Time) (*Report, error) {
	r := &Report{Results: map[string]map[string]int{}, Decisions: map[string]map[string]int{},
		Approvals: map[string]int{}, ApprovedBy: map[string]int{}}
	if !since.IsZero() {
		r.Since = since.UTC().Format(time.RFC3339)
	}
	var reasoning, reread []int64
	files, err := sessionlog.Files(layout.Sessions.In(state))
	if err != nil {
		return nil, fmt.Errorf("report: session logs: %w", err)
	}
	fired := 0
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && !since.IsZero() && fi.ModTime().Before(since) {
			continue
		}
		r.SessionLogs++
		t := &turns{gap: map[int64]int64{}, capUsage: map[int64]int{}, capStop: map[int64]bool{}}
		err := sessionlog.Scan(f, func(_ int, rec sessionlog.Record, _ sessionlog.Trust) error {
			t.seen(rec.TurnOf())
			switch v := rec.(type) {
			case *sessionlog.Usage:
				r.Completions++
				reasoning = append(reasoning, int64(v.ReasoningTokens))
				r.PrefillUS += v.PromptUS
				r.GenerateUS += v.PredictedUS
				t.gap[v.Turn] += int64(max(v.CacheGap, 0))
				if v.CapFired {
					t.capUsage[v.Turn]++
				}
			case *sessionlog.Stopped:
				if v.Reason == wire.StopThinkingCap {
					t.capStop[v.Turn] = true
				}
			case *sessionlog.CacheLoss:
				r.CacheLosses++
				r.CacheLost += int64(v.Tokens)
			case *sessionlog.ToolResult:
				add(r.Results, toolKey(v.Tool), sessionlog.Word(v.Status))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("report: %w; see docs/runbook.md#session-log-damaged", err)
		}
		r.Turns += len(t.order)
		for _, n := range t.order {
			reread = append(reread, t.gap[n])
			// A cap fire is a usage record that says so (loopd's cap
			// ends the thinking and the turn goes on), or, in logs of a
			// loopd that stopped the turn, its thinking_cap stop record
			// when no usage record of the turn says so.
			c := t.capUsage[n]
			if c == 0 && t.capStop[n] {
				c = 1
			}
			fired += c
		}
	}
	r.Reasoning, r.Reread = distOf(reasoning), distOf(reread)
	r.Cap = Verdict(fired, r.Completions)
	if err := r.audit(layout.Audit.In(state), since); err != nil {
		return nil, err
	}
	return r, nil
}

// turns tracks one session log's turns in order.
type turns struct {
	order    []int64
	last     int64
	gap      map[int64]int64
	capUsage map[int64]int
	capStop  map[int64]bool
}

func (t *turns) seen(n int64) {
	if len(t.order) == 0 || n != t.last {
		if !slices.Contains(t.order, n) {
			t.order = append(t.order, n)
		}
		t.last = n
	}
}

// OtherTool is the key every tool name outside pkg/tool/toolset's list is
// counted under: the model chooses the names it calls, so a name taken
// as it is would be model-written text on the owner's terminal and a
// label with no bound on how many values it takes.
const OtherTool = "other"

// toolKey is name if it is one of the tools, else OtherTool.
func toolKey(name string) string {
	if _, ok := toolset.Lookup(name); ok {
		return name
	}
	return OtherTool
}

func add(m map[string]map[string]int, k1, k2 string) {
	if m[k1] == nil {
		m[k1] = map[string]int{}
	}
	m[k1][k2]++
}

// audit reads the audit log's records (in file order, each line parsed
// strictly) from since on.
func (r *Report) audit(dir string, since time.Time) error {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("report: audit log: %w; see docs/runbook.md#audit-unreadable", err)
	}
	consult := map[int64]bool{}
	from := ""
	if !since.IsZero() {
		from = since.UTC().Format(audit.TimeLayout)
	}
	for _, e := range ents {
		if !audit.IsLogName(e.Name()) {
			continue
		}
		if err := r.auditFile(filepath.Join(dir, e.Name()), from, consult); err != nil {
			return err
		}
	}
	return nil
}

// auditFile reads one day's file: never through a link, and only a
// regular file (opened without blocking, so a FIFO put in its place
// cannot hold bxctl report or status).
func (r *Report) auditFile(path, from string, consult map[int64]bool) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("report: audit log: %w; see docs/runbook.md#audit-unreadable", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("report: audit log: %s is not a regular file; see docs/runbook.md#audit-unreadable", path)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), audit.MaxLine+1)
	for n := 1; sc.Scan(); n++ {
		rec, err := audit.ParseLine(sc.Bytes())
		if err != nil {
			return fmt.Errorf("report: %s:%d: %v; run bxctl audit verify; see docs/runbook.md#audit-chain-broken", path, n, err)
		}
		h := rec.Head()
		if h.Time < from {
			if d, ok := rec.(*audit.Decision); ok && d.Record.Tool == "consult" {
				consult[d.Seq] = true // its result may fall after since
			}
			continue
		}
		r.AuditRecords++
		switch v := rec.(type) {
		case *audit.Allowance:
			r.AllowancesMade++
		case *audit.AllowanceEnd:
			r.AllowancesEnded++
		case *audit.Decision:
			add(r.Decisions, toolKey(v.Record.Tool), string(v.Record.Outcome))
			if v.Record.Allowance > 0 {
				r.AllowedByAllowance++
			}
			if v.Record.Tool == "consult" {
				consult[v.Seq] = true
				if v.Record.Outcome != audit.Denied {
					r.ConsultsDecided++
				}
			}
		case *audit.Approval:
			r.Approvals[string(v.Answer)]++
			by, _, _ := strings.Cut(v.Approver, ":")
			if by == "" {
				by = "none"
			}
			r.ApprovedBy[by]++
		case *audit.Result:
			if consult[v.Decision] {
				r.ConsultsSent++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("report: %s: %v; see docs/runbook.md#audit-unreadable", path, err)
	}
	return nil
}
