package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/report"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// runMetrics is `bxctl metrics [--state DIR] [--out FILE]`: the report's
// figures as a Prometheus textfile, written atomically into the layout's
// metrics/ directory for node_exporter's textfile collector. Nothing
// listens on a port; run it from a timer.
func runMetrics(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("metrics", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	out := fs.String("out", "", "the textfile to write (default STATE/metrics/"+report.MetricsName+"; - for stdout)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: bxctl metrics [--state DIR] [--out FILE|-]")
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl metrics: %v\n", err)
		return ExitUsage
	}
	r, err := report.Collect(state, time.Time{})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %v\n", err)
		return ExitFailed
	}
	if *out == "-" {
		if err := r.WriteProm(stdout, time.Now()); err != nil {
			fmt.Fprintf(stderr, "bxctl metrics: %v\n", err)
			return ExitFailed
		}
		return ExitOK
	}
	path := *out
	if path == "" {
		path = filepath.Join(layout.Metrics.In(state), report.MetricsName)
	}
	if err := r.WriteMetricsFile(path, time.Now()); err != nil {
		fmt.Fprintf(stderr, "bxctl %v\n", err)
		return ExitFailed
	}
	return ExitOK
}
