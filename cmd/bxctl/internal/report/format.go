package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// Dist is a distribution of whole numbers: its count, sum and
// nearest-rank percentiles.
type Dist struct {
	N   int   `json:"n"`
	Sum int64 `json:"sum"`
	Min int64 `json:"min"`
	P50 int64 `json:"p50"`
	P90 int64 `json:"p90"`
	P99 int64 `json:"p99"`
	Max int64 `json:"max"`
}

func distOf(xs []int64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	d := Dist{N: len(s), Min: s[0], Max: s[len(s)-1]}
	for _, x := range s {
		d.Sum += x
	}
	rank := func(p int) int64 { return s[max((p*len(s)+99)/100, 1)-1] }
	d.P50, d.P90, d.P99 = rank(50), rank(90), rank(99)
	return d
}

func (d Dist) String() string {
	if d.N == 0 {
		return "none"
	}
	return fmt.Sprintf("n %d, mean %d, min %d, p50 %d, p90 %d, p99 %d, max %d", d.N, d.Sum/int64(d.N), d.Min, d.P50, d.P90, d.P99, d.Max)
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// seconds is microseconds as seconds with one decimal.
func seconds(us int64) string { return fmt.Sprintf("%d.%d s", us/1e6, us%1e6/1e5) }

// WriteText writes the report as a table.
func (r *Report) WriteText(w io.Writer) {
	since := "all logs"
	if r.Since != "" {
		since = "since " + r.Since
	}
	fmt.Fprintf(w, "Boxmaker report, %s: %d session logs, %d turns, %d audit records\n\n", since, r.SessionLogs, r.Turns, r.AuditRecords)
	row := func(k, v string) { fmt.Fprintf(w, "%-34s %s\n", k, v) }
	row("completions", fmt.Sprint(r.Completions))
	row("reasoning tokens per completion", r.Reasoning.String())
	row("thinking cap fired", fmt.Sprintf("%d (%d.%d%%)", r.Cap.Fired, r.Cap.PerMille/10, r.Cap.PerMille%10))
	row("thinking cap rule", r.Cap.Verdict+": "+r.Cap.Why)
	row("tokens re-read per turn", r.Reread.String())
	row("cache losses", fmt.Sprintf("%d (%d tokens)", r.CacheLosses, r.CacheLost))
	row("prefill", seconds(r.PrefillUS))
	row("generation", seconds(r.GenerateUS))
	table(w, "tool results (session logs)", r.Results)
	table(w, "tool decisions (audit log)", r.Decisions)
	fmt.Fprintln(w)
	row("approvals", pairs(r.Approvals))
	row("approvals answered by", pairs(r.ApprovedBy))
	row("session allowances", fmt.Sprintf("%d calls allowed without asking, %d made, %d ended", r.AllowedByAllowance, r.AllowancesMade, r.AllowancesEnded))
	row("consults", fmt.Sprintf("%d allowed or asked, %d sent", r.ConsultsDecided, r.ConsultsSent))
}

func table(w io.Writer, title string, m map[string]map[string]int) {
	fmt.Fprintf(w, "\n%s\n", title)
	if len(m) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-32s %s\n", escape.Line(k), pairs(m[k]))
	}
}

func pairs(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var ps []string
	for k, v := range m {
		ps = append(ps, fmt.Sprintf("%s %d", escape.Line(k), v))
	}
	slices.Sort(ps)
	return strings.Join(ps, ", ")
}
