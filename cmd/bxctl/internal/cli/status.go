package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/status"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
)

// runStatus is `bxctl status [--state DIR] [--session ID] [--json]`: each
// role, the model and the session, cache reuse, approvals, fleet memory,
// the audit anchor's age and the jobs, read-only and bounded (package
// status).
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("status", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	session := fs.String("session", "", "the session `ID` (default: the one written last)")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	anchors := fs.String("anchors", "", "the owner's anchors file (default $XDG_STATE_HOME/boxmaker/"+anchorsName+")")
	probe := fs.Duration("probe-timeout", status.DefaultProbe, "bound on each probe")
	total := fs.Duration("timeout", status.DefaultTotal, "bound on the whole status")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *probe <= 0 || *total <= 0 {
		fmt.Fprintln(stderr, "usage: bxctl status [--state DIR] [--session ID] [--json] [--anchors FILE] [--probe-timeout D] [--timeout D]")
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl status: %v\n", err)
		return ExitUsage
	}
	path := *anchors
	if path == "" {
		if path, err = defaultAnchors(); err != nil {
			fmt.Fprintf(stderr, "bxctl status: %v\n", err)
			return ExitFailed
		}
	}
	st := status.Run(ctx, status.Options{State: state, Session: *session, Probe: *probe, Total: *total, Now: time.Now(),
		Anchors: func(dir string) ([]audit.Anchor, error) { return readAnchors(path, dir) }})
	if *asJSON {
		if err := st.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "bxctl status: %v\n", err)
			return ExitFailed
		}
		return ExitOK
	}
	st.WriteText(stdout)
	return ExitOK
}
