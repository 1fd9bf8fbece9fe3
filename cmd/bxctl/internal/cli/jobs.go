package cli

import (
	"context"
	"fmt"
	"io"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// runJobs is `bxctl jobs`: every job file loopd read at its last look,
// with its schedule, where its report goes, its next run and how its last
// run ended (the answer's start, the reason of a stop, and each call
// brokerd refused), then every file loopd refused and why. What the model
// wrote is escaped like every other text bxctl prints.
func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("jobs", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker, or "+up.DevRoot+"/state as root)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl jobs: %v\n", err)
		return ExitUsage
	}
	list, err := ask[*wire.JobList](ctx, state, &wire.Loop, &wire.ListJobs{})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl jobs: %v\n", err)
		return ExitFailed
	}
	if len(list.Jobs) == 0 && len(list.Refused) == 0 {
		fmt.Fprintln(stdout, "no jobs (put job files in STATE/jobs; see deploy/jobs/README.md)")
		return ExitOK
	}
	for _, j := range list.Jobs {
		next := j.Next
		if next == "" {
			next = "never"
		}
		fmt.Fprintf(stdout, "job %s: %s, deliver %s, next %s, %d runs\n", escape.Line(j.Name), escape.Line(j.Schedule), escape.Line(j.Deliver), escape.Line(next), j.Runs)
		if l := j.Last; l != nil {
			fmt.Fprintf(stdout, "  last: run %d (session %s) started %s", l.Run, escape.Line(l.Session), escape.Line(l.Started))
			if l.Ended != "" {
				fmt.Fprintf(stdout, ", ended %s", escape.Line(l.Ended))
			}
			if l.Catchup {
				fmt.Fprint(stdout, ", a catch-up for times missed while loopd was down")
			}
			fmt.Fprintf(stdout, ": %s\n", l.Outcome)
			if l.Reason != "" {
				fmt.Fprintf(stdout, "  reason: %s\n", escape.Line(l.Reason))
			}
			for _, d := range l.Denied {
				fmt.Fprintf(stdout, "  refused: %s\n", escape.Line(d))
			}
			if l.Text != "" {
				fmt.Fprintf(stdout, "  answer: %s\n", escape.Line(l.Text))
			}
		}
	}
	for _, r := range list.Refused {
		fmt.Fprintf(stdout, "refused %s: %s\n", escape.Line(r.File), escape.Line(r.Error))
	}
	return ExitOK
}
