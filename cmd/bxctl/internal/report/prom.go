package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// MetricsName is the textfile `bxctl metrics` writes in layout.Metrics.
const MetricsName = "boxmaker.prom"

// WriteProm writes r in the Prometheus text exposition format (0.0.4)
// that node_exporter's textfile collector reads (prometheus/docs,
// content/docs/instrumenting/exposition_formats.md): a HELP and TYPE
// line per family, then its samples; label values escaped; no
// timestamps (the collector refuses them) but a gauge of when it was
// written.
func (r *Report) WriteProm(w io.Writer, now time.Time) error {
	var b strings.Builder
	family := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	sample := func(name string, v any, labels ...string) {
		b.WriteString(name)
		if len(labels) > 0 {
			b.WriteByte('{')
			for i := 0; i < len(labels); i += 2 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%s=\"%s\"", labels[i], escapeLabel(labels[i+1]))
			}
			b.WriteByte('}')
		}
		fmt.Fprintf(&b, " %v\n", v)
	}
	summary := func(name, help string, d Dist) {
		family(name, "summary", help)
		for _, q := range []struct {
			q string
			v int64
		}{{"0.5", d.P50}, {"0.9", d.P90}, {"0.99", d.P99}} {
			sample(name, q.v, "quantile", q.q)
		}
		sample(name+"_sum", d.Sum)
		sample(name+"_count", d.N)
	}
	counter := func(name, help string, v any) {
		family(name, "counter", help)
		sample(name, v)
	}
	family("boxmaker_metrics_written_timestamp_seconds", "gauge", "When bxctl metrics wrote this file (Unix time).")
	sample("boxmaker_metrics_written_timestamp_seconds", now.Unix())
	counter("boxmaker_completions_total", "Model completions in the session logs.", r.Completions)
	counter("boxmaker_turns_total", "Turns in the session logs.", r.Turns)
	summary("boxmaker_reasoning_tokens", "Reasoning tokens per completion.", r.Reasoning)
	counter("boxmaker_thinking_cap_fired_total", "Completions whose thinking cap fired.", r.Cap.Fired)
	family("boxmaker_thinking_cap_raise", "gauge", "1 when the decision log's rule says raise the cap (over 5% of at least 200 completions).")
	sample("boxmaker_thinking_cap_raise", boolInt(r.Cap.Verdict == VerdictRaise))
	summary("boxmaker_reread_tokens", "Tokens the server re-read beyond the new suffix, per turn.", r.Reread)
	counter("boxmaker_cache_losses_total", "Completions where the server lost the slot's cache.", r.CacheLosses)
	counter("boxmaker_cache_lost_tokens_total", "Tokens re-read because of cache losses.", r.CacheLost)
	counter("boxmaker_prefill_seconds_total", "Seconds the server spent reading prompts.", float64(r.PrefillUS)/1e6)
	counter("boxmaker_generation_seconds_total", "Seconds the server spent generating.", float64(r.GenerateUS)/1e6)
	nested := func(name, help, l1, l2 string, m map[string]map[string]int) {
		family(name, "counter", help)
		for _, k := range sortedKeys(m) {
			for _, k2 := range sortedKeys(m[k]) {
				sample(name, m[k][k2], l1, k, l2, k2)
			}
		}
	}
	nested("boxmaker_tool_results_total", "Tool results in the session logs, by tool and status.", "tool", "status", r.Results)
	nested("boxmaker_tool_decisions_total", "Decisions in the audit log, by tool and outcome.", "tool", "outcome", r.Decisions)
	family("boxmaker_approvals_total", "counter", "Answers to asks in the audit log, by answer.")
	for _, k := range sortedKeys(r.Approvals) {
		sample("boxmaker_approvals_total", r.Approvals[k], "answer", k)
	}
	counter("boxmaker_allowed_by_allowance_total", "Calls a session allowance allowed without asking the owner.", r.AllowedByAllowance)
	counter("boxmaker_consults_sent_total", "Consults that ran (an audit result of a consult decision).", r.ConsultsSent)
	counter("boxmaker_audit_records_total", "Records in the audit log.", r.AuditRecords)
	_, err := io.WriteString(w, b.String())
	return err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// escapeLabel escapes a label value: backslash, double quote, newline.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// WriteMetricsFile writes r's textfile at path atomically: a temporary
// file in the same directory (named so the collector, which reads only
// *.prom, passes over it), synced, 0644, renamed over the old one.
func (r *Report) WriteMetricsFile(path string, now time.Time) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("metrics: %w; see docs/runbook.md#metrics-not-written", err)
	}
	err = r.WriteProm(tmp, now)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("metrics: %w; see docs/runbook.md#metrics-not-written", err)
	}
	return nil
}
