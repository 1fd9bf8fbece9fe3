// Package daemon is the shared shape of every Boxmaker daemon's main: the
// same flags with the same names and defaults, a JSON logger on stderr for
// journald, a context cancelled by SIGINT or SIGTERM, and exit codes with
// documented meanings.
//
// Invariant: a role's body runs under the umask its layout table entries
// give it ([layout.Umask]), so no file it makes, by any library, has a
// bit the table denies, not even for a moment.
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
	"path/filepath"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
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
	// State is the state directory the role checks against package
	// layout's table before it runs, and takes every socket and state
	// path from: -state, else the directory above the config's when the
	// config is <state>/config/<role>.toml. A role with neither is
	// refused: it would have no table to find its peers by.
	State string
	// Users are the role ids the state directory's users.toml gives, or
	// one user for every role without one.
	Users layout.Users
}

// Load runs a role's config loader (package roleconf/<role>) on the
// config and the state directory, logs each key the config still holds
// that the loader accepted because it names the table's own path (one
// warning each: the owner should delete it), and marks a refusal as
// one ([Refuse]). Every role loads its config through it.
func Load[T any](f Flags, log *slog.Logger, load func(path, state string) (T, []string, error)) (T, error) {
	c, leftover, err := load(f.Config, f.State)
	if err != nil {
		return c, Refuse(err)
	}
	for _, l := range leftover {
		log.Warn(l)
	}
	return c, nil
}

// Accept is the uids the listener of s takes: the table's, with a user
// per role; else nil (package sockets' default, this daemon's own uid).
// No config names them: the keys that did are refused by each role's
// loader (package roleconf, see docs/runbook.md#layout-accept).
func (f Flags) Accept(s *wire.Socket) []uint32 {
	if f.State == "" || f.Users.Single() {
		return nil
	}
	return layout.AcceptUIDs(f.Users, s)
}

// Listener is the uids the listener of s may run as, for a client that
// checks who it reached: the table's listener with a user per role, else
// nil (this daemon's own uid).
func (f Flags) Listener(s *wire.Socket) []uint32 {
	if f.State == "" || f.Users.Single() {
		return nil
	}
	return []uint32{f.Users.Of(layout.SocketFor(s).Owner).UID}
}

// OwnerUID is the uid whose files (grants, jobs) the role trusts as the
// owner's: with a user per role, users.toml's owner (configured must then
// be absent or the same: a daemon's uid there would let that role write
// what runs as the owner's), else configured (nil: this daemon's own
// uid, package ownership's Self).
func (f Flags) OwnerUID(key string, configured *uint32) (*uint32, error) {
	if f.State == "" || f.Users.Single() {
		return configured, nil
	}
	owner := f.Users.Of(layout.Owner).UID
	if configured != nil && *configured != owner {
		whose := "not the owner's"
		for _, r := range layout.Daemons {
			if f.Users.Of(r).UID == *configured {
				whose = r + "'s, so a file " + r + " could write would be trusted as the owner's"
			}
		}
		return nil, Refuse(fmt.Errorf("config %s: %s = %d is %s; users.toml's owner is uid %d; see docs/runbook.md#layout-owner-uid", f.Config, key, *configured, whose, owner))
	}
	return &owner, nil
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
	fs.StringVar(&f.State, "state", "", "the state `directory`: its layout is checked, and every socket and state path is the layout table's in it (default: the one holding the config's config/ directory)")
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
	err := checkLayout(name, &f, log)
	if err == nil {
		// Every file the role makes gets no bit the layout table denies
		// it, from its first byte, even one a library creates with a
		// mode of its own choosing (memoryd's SQLite files).
		defer syscall.Umask(syscall.Umask(int(layout.Umask(name, f.Users))))
		err = run(ctx, log, f)
	}
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

// checkLayout finds the state directory, checks its format, loads its
// users and checks the role's entries (package layout); a newer format
// or a mismatch is a refusal.
func checkLayout(name string, f *Flags, log *slog.Logger) error {
	if f.State == "" {
		if cd := filepath.Dir(f.Config); filepath.Base(cd) == "config" && filepath.Base(f.Config) == name+".toml" {
			f.State = filepath.Dir(cd)
		}
	}
	var err error
	if f.State == "" {
		return Refuse(fmt.Errorf("no state directory: -state is not set and the config %s is not STATE/config/%s.toml; every socket and state path is the layout table's under a state directory; see docs/runbook.md#state-dir-missing", f.Config, name))
	}
	if f.State, err = filepath.Abs(f.State); err != nil {
		return Refuse(err)
	}
	// The format first: a newer one may have moved what the rest reads.
	if _, err := layout.CheckFormat(f.State, name); err != nil {
		return Refuse(err)
	}
	if f.Users, err = layout.LoadUsers(f.State); err != nil {
		return Refuse(err)
	}
	if err := layout.Check(f.State, f.Users, name); err != nil {
		return Refuse(err)
	}
	return nil
}
