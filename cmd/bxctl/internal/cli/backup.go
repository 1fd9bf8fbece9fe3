package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/backup"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// runBackup is `bxctl backup [--state DIR] DEST`: a consistent snapshot
// of the state directory, taken while the stack runs (package backup).
func runBackup(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("backup", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: bxctl backup [--state DIR] DEST\nWrites a backup of the state directory into DEST (new or empty) while the stack runs; secrets are never in it.")
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl backup: %v\n", err)
		return ExitUsage
	}
	m, err := backup.Take(state, fs.Arg(0), time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %v\n", err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "backup of %s (format %d) in %s: %d files, audit log to seq %d, consult log to seq %d\n",
		state, m.Format, fs.Arg(0), len(m.Files), m.AuditSeq, m.ConsultSeq)
	for _, l := range m.LeftOut {
		fmt.Fprintf(stdout, "left out: %s\n", l)
	}
	for _, c := range m.Credentials {
		fmt.Fprintf(stdout, "needs (not in the backup): %s\n", c)
	}
	return ExitOK
}

// runRestore is `bxctl restore [--anchors FILE] [--from DIR]
// [--no-anchors] SRC STATE`: the backup in SRC into STATE, which must be
// new or empty, verified before it is put in place against the owner's
// anchors of the logs under DIR (default STATE: a restore puts back the
// state that was lost). Every string the manifest holds is the backup's
// word, so it is escaped before it is printed.
func runRestore(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("restore", stderr)
	anchors := fs.String("anchors", "", "the owner's anchors file (default $XDG_STATE_HOME/boxmaker/"+anchorsName+")")
	from := fs.String("from", "", "the state `directory` the backup was taken of, whose anchors are checked (default STATE)")
	noAnchors := fs.Bool("no-anchors", false, "restore although none of your anchors name the logs of --from (you never anchored that state)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: bxctl restore [--anchors FILE] [--from DIR] [--no-anchors] SRC STATE\nRestores the backup in SRC into STATE (new or empty), after verifying it: the audit and consult chains against their heads and your anchors of the logs under DIR (default STATE), every session log, the identity files and the grants.")
		return ExitUsage
	}
	path := *anchors
	if path == "" {
		var err error
		if path, err = defaultAnchors(); err != nil {
			fmt.Fprintf(stderr, "bxctl restore: %v\n", err)
			return ExitFailed
		}
	}
	state, err := resolveState(fs.Arg(1))
	if err != nil {
		fmt.Fprintf(stderr, "bxctl restore: %v\n", err)
		return ExitUsage
	}
	source := state
	if *from != "" {
		if source, err = resolveState(*from); err != nil {
			fmt.Fprintf(stderr, "bxctl restore: %v\n", err)
			return ExitUsage
		}
	}
	r, err := backup.Restore(fs.Arg(0), state, backup.Options{
		Anchors:   func(log string) ([]audit.Anchor, error) { return readAnchors(path, log) },
		From:      source,
		NoAnchors: *noAnchors,
	})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %s\n", escape.Line(err.Error()))
		return ExitFailed
	}
	m := r.Manifest
	fmt.Fprintf(stdout, "restored the backup of %s taken %s into %s: audit log to seq %d and consult log (%d lines) verified against their heads and %d anchor(s) of %s; %d session log(s) decode; %d grant(s) load\n",
		escape.Line(m.Source), escape.Line(m.Taken), escape.Line(state), r.AuditSeq, r.ConsultLines, r.Anchors, escape.Line(source), r.SessionLogs, r.Grants)
	if len(r.Moved) > 0 {
		fmt.Fprintf(stdout, "paths moved from %s to %s in: %s\n", escape.Line(m.Source), escape.Line(state), escape.Line(strings.Join(r.Moved, ", ")))
	}
	if source != state {
		fmt.Fprintf(stdout, "your anchors name the logs under %s; anchor the restored log with: bxctl audit anchor %s/broker/audit\n", escape.Line(source), escape.Line(state))
	}
	if slices.ContainsFunc(m.Files, func(f backup.File) bool { return f.Path == backup.OutboxPath }) {
		fmt.Fprintf(stdout, "the fleet outbox (%s) passes SQLite's integrity check: %d message(s) to send, each looked for in Honcho first\n", backup.OutboxPath, r.Outbox)
	}
	fmt.Fprintln(stdout, "memoryd rebuilds the recall index (index/recall.db) at its first start")
	for _, c := range m.Credentials {
		fmt.Fprintf(stdout, "put back before starting: %s\n", escape.Line(c))
	}
	return ExitOK
}
