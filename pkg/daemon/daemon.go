// Package daemon is the shared shape of every Boxmaker daemon's main: the
// same flags with the same names and defaults, a JSON logger on stderr for
// journald, a context cancelled by SIGINT or SIGTERM, and exit codes with
// documented meanings.
//
// Exit codes (also in docs/runbook.md#exit-codes):
//
//	0  stopped normally (cancellation is not an error)
//	1  failed while running
//	2  refused to start: bad flags or config, or a failed startup check
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitRefused = 2
)

// ErrRefused marks an error from Run that happened before the daemon was
// serving: wrap a startup failure with [Refuse] and Main exits with
// ExitRefused.
var ErrRefused = errors.New("refused to start")

// Refuse marks err, a startup failure, as a refusal: the result reads
// "refused to start: <err>" and Main exits with ExitRefused. err's text is
// kept but not its chain (%v): nothing inspects a cause across an exit.
func Refuse(err error) error { return fmt.Errorf("%w: %v", ErrRefused, err) }

// Flags are the flags every daemon takes.
type Flags struct {
	Config string // -config: path to the role's TOML file
}

// Run is a daemon's body. It returns nil when ctx is cancelled.
type Run func(ctx context.Context, log *slog.Logger, f Flags) error

// Main parses args, runs run and returns the exit code; a main function
// is os.Exit(daemon.Main(...)), so that deferred calls in run still run.
// A role with flags of its own (brokerd's -accept-break) defines them in
// define, which runs before parsing.
func Main(name string, args []string, stderr io.Writer, run Run, define ...func(*flag.FlagSet)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f Flags
	fs.StringVar(&f.Config, "config", "/etc/boxmaker/"+name+".toml", "path to the `file` holding "+name+"'s TOML config")
	for _, d := range define {
		d(fs)
	}
	if err := fs.Parse(args); err != nil {
		return ExitRefused
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", name, fs.Args())
		return ExitRefused
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("role", name)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("starting", "config", f.Config)
	err := run(ctx, log, f)
	switch {
	case err == nil:
		log.Info("stopped")
		return ExitOK
	case errors.Is(err, ErrRefused):
		log.Error("refused to start", "err", err.Error())
		return ExitRefused
	default:
		log.Error("failed", "err", err.Error())
		return ExitFailed
	}
}
