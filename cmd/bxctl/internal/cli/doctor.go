package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/doctor"
	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
)

// runDoctor is `bxctl doctor [--state DIR] [--json]`: the read-only
// self-audit of package doctor. Its exit codes are its own, for scripts:
// 0 clean, 1 warnings only, 2 problems, 3 the doctor could not run (a bad
// flag included, so that 2 always means problems found).
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("doctor", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker, or "+up.DevRoot+"/state as root)")
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	anchors := fs.String("anchors", "", "the owner's anchors file (default $XDG_STATE_HOME/boxmaker/"+anchorsName+")")
	probe := fs.Duration("probe-timeout", doctor.DefaultProbe, "bound on each probe of Podman and llama-server")
	total := fs.Duration("timeout", doctor.DefaultTotal, "bound on the whole audit")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return ExitUsage // the usage is printed; bxctl -h exits 0
	} else if err != nil || fs.NArg() > 0 || *probe <= 0 || *total <= 0 {
		fmt.Fprintln(stderr, "usage: bxctl doctor [--state DIR] [--json] [--anchors FILE] [--probe-timeout D] [--timeout D]")
		return doctor.ExitBroken
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl doctor: %v\n", err)
		return doctor.ExitBroken
	}
	path := *anchors
	if path == "" {
		if path, err = defaultAnchors(); err != nil {
			fmt.Fprintf(stderr, "bxctl doctor: %v\n", err)
			return doctor.ExitBroken
		}
	}
	r, err := doctor.Run(ctx, doctor.Options{
		State:   state,
		Anchors: func(dir string) ([]audit.Anchor, error) { return readAnchors(path, dir) },
		Probe:   *probe, Total: *total, Now: time.Now(),
	})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %v\n", err)
		return doctor.ExitBroken
	}
	if *asJSON {
		if err := r.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "bxctl doctor: %v\n", err)
			return doctor.ExitBroken
		}
	} else {
		r.WriteText(stdout)
	}
	return r.Exit()
}
