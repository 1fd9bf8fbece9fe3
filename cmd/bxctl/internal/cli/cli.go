// Package cli is bxctl, the owner's command line.
//
// Invariant: bxctl holds no authority of its own. It reads what the
// daemons and the owner's files say and prints it escaped; every action
// that changes anything goes through a daemon's admin socket, where the
// daemon decides. The exceptions set a host up, as the owner (root)
// running them: `up` runs the roles from a state directory, and `install`
// (package install) deploys them as systemd units.
//
// Exit codes: 0 success (every check passed); 1 the command ran and
// something failed or was refused; 2 usage error. `bxctl doctor` has
// its own (package doctor): 0 clean, 1 warnings, 2 problems, 3 it could
// not run.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"approvals":     {"list the tool calls waiting for your approval", runApprovals},
	"approve":       {"approve a waiting tool call by its id (--session: and the same call for the rest of the session)", runApprove},
	"allowances":    {"list the live session allowances, or revoke one (revoke ID)", runAllowances},
	"refuse":        {"refuse a waiting tool call by its id", runRefuse},
	"deny":          {"another name for refuse", runRefuse},
	"audit":         {"verify the audit log (chain, head, anchors) or anchor its end", runAudit},
	"selftest":      {"check a llama-server against the inference contract", runSelftest},
	"grants":        {"check a grant directory offline; list, apply or drop grant proposals", runGrants},
	"up":            {"run the local stack from a state directory", runUp},
	"chat":          {"talk to Boxmaker from the terminal", runChat},
	"compact":       {"change a session's epoch now: it goes on from a summary (SESSION)", runCompact},
	"memory":        {"memory: status (the fleet outbox), resync, log, undo FILE, check (stdin), review", runMemory},
	"reindex":       {"rebuild memoryd's recall index from the files", runReindex},
	"jobs":          {"list the scheduled jobs: next and last runs, how each ended, refused files", runJobs},
	"install":       {"install Boxmaker's units, users and images on this systemd host (root)", runInstall},
	"doctor":        {"audit the installation, read-only (exit 0 clean, 1 warnings, 2 problems, 3 could not run)", runDoctor},
	"verify-device": {"the inference host's on-device checks against its llama-server (nix run .#verify-device)", runVerifyDevice},
}

// Main runs bxctl with args (without the program name) and returns the
// exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "bxctl: unknown command %q\n", args[0])
		usage(stderr)
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: bxctl <command> [flags]")
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "Run bxctl <command> -h for a command's flags.")
}

// flags makes a command's flag set, printing errors to stderr.
func flags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("bxctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
