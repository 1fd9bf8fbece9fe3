package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/backup"
	"wntrmute.dev/boxmaker/cmd/bxctl/internal/migrate"
	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// runMigrate is `bxctl migrate [--state DIR] [--backup DEST]`: the state
// directory to this build's format, after a backup (package migrate),
// with the stack stopped.
func runMigrate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("migrate", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	dest := fs.String("backup", "", "where the backup before migrating goes (default STATE.pre-format-N-TIME beside the state directory)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: bxctl migrate [--state DIR] [--backup DEST]")
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl migrate: %v\n", err)
		return ExitUsage
	}
	if s := up.Live(state); s != "" {
		fmt.Fprintf(stderr, "bxctl migrate: %s answers: stop the stack first; see docs/runbook.md#socket-in-use\n", s)
		return ExitFailed
	}
	from, err := layout.ReadFormat(state)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl migrate: %v\n", err)
		return ExitFailed
	}
	if *dest == "" {
		*dest = migrate.BackupPath(state, from, time.Now())
	}
	take := func(state, dest string) error {
		if _, err := backup.Take(state, dest, time.Now()); err != nil {
			return err
		}
		m, err := backup.ReadManifest(dest)
		if err == nil {
			err = m.CheckFiles(dest)
		}
		return err
	}
	r, err := migrate.Run(state, migrate.Steps, layout.Format, *dest, take)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %v\n", err)
		return ExitFailed
	}
	if r.Backup == "" {
		fmt.Fprintf(stdout, "state %s is at format %d already: nothing to do\n", state, r.To)
		return ExitOK
	}
	fmt.Fprintf(stdout, "backup before migrating: %s\n", r.Backup)
	for _, d := range r.Done {
		fmt.Fprintf(stdout, "migrated %s\n", d)
	}
	fmt.Fprintf(stdout, "state %s is at format %d\n", state, r.To)
	return ExitOK
}
