package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/report"
)

// runReport is `bxctl report [--state DIR] [--since D] [--json]`: what the
// session logs and the audit log say (package report), read-only.
func runReport(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("report", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	sinceFlag := fs.String("since", "", "only from `D` on: a date (2026-11-20), a time (RFC 3339) or an age (36h, 7d)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: bxctl report [--state DIR] [--since D] [--json]")
		return ExitUsage
	}
	since, err := parseSince(*sinceFlag, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "bxctl report: %v\n", err)
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl report: %v\n", err)
		return ExitUsage
	}
	r, err := report.Collect(state, since)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %v\n", err)
		return ExitFailed
	}
	if *asJSON {
		if err := r.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "bxctl report: %v\n", err)
			return ExitFailed
		}
		return ExitOK
	}
	r.WriteText(stdout)
	return ExitOK
}

// parseSince reads --since: empty is all; a date is its midnight UTC; a
// time is RFC 3339; an age (Go's durations, and Nd for days) counts back
// from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n > 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q is not a date (2026-11-20), an RFC 3339 time or an age (36h, 7d)", s)
}
