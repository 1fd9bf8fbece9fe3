// Package cli is bxctl, the owner's command line.
//
// Invariant: bxctl holds no authority of its own. It reads what the
// daemons and the owner's files say and prints it escaped; every action
// that changes a daemon's state goes through the daemon's socket
// (admin.sock, memadmin.sock, loop.sock), where the daemon decides. The
// exceptions are the owner's own acts: `up` (package up) runs the roles
// from a state directory, `install` (package install) deploys them as
// systemd units, `grants apply` and `mcp pin --write` write an owner file
// (a grant or a pin) as the owner running them, with the owner-file rules
// brokerd reads it under (writeOwnerFile), and the state commands write
// files directly: `audit anchor` appends to the owner's anchors file,
// `metrics` writes its textfile, `backup` writes a snapshot into a new or
// empty directory, `restore` fills a new or empty state directory, and
// `migrate` rewrites one, with the stack stopped, after a backup.
//
// Exit codes: 0 success (every check passed); 1 the command ran and
// something failed or was refused; 2 usage error. -h, -help or --help
// anywhere on a command's line prints its usage on stdout and exits 0,
// and nothing else on the line is acted on; a command with subcommands
// ([subcommands]) refuses one it does not have. `bxctl doctor` has
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
	"slices"
	"sort"
	"strings"
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

// subcommands are each command's subcommands, for those that have any:
// a first argument that is not a flag must be one of them (a map of its
// own, so the command table's rows stay two values).
var subcommands = map[string][]string{
	"audit":  {"verify", "anchor"},
	"grants": {"check", "proposals", "apply", "drop", "suggest"},
	"mcp":    {"pin"},
	"memory": {"status", "resync", "log", "undo", "check", "review", "why", "forget"},
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
	"mcp":           {"pin NAME: list a declared MCP server's tools (a fresh container; no network, or a remote server's host alone), show them escaped, write the pin", runMCP},
	"up":            {"run the local stack from a state directory", runUp},
	"chat":          {"talk to Boxmaker from the terminal", runChat},
	"compact":       {"change a session's epoch now: it goes on from a summary (SESSION)", runCompact},
	"memory":        {"memory: status (the fleet outbox), resync, log, undo FILE, check (stdin), review", runMemory},
	"reindex":       {"rebuild memoryd's recall index from the files", runReindex},
	"jobs":          {"list the scheduled jobs: next and last runs, how each ended, refused files", runJobs},
	"install":       {"install Boxmaker's units, users and images on this systemd host (root)", runInstall},
	"doctor":        {"audit the installation, read-only (exit 0 clean, 1 warnings, 2 problems, 3 could not run)", runDoctor},
	"backup":        {"write a backup of the state directory while the stack runs (DEST)", runBackup},
	"restore":       {"restore a backup into a new or empty state directory, verified (SRC STATE)", runRestore},
	"migrate":       {"move the state directory to this build's format, after a backup (stack stopped)", runMigrate},
	"report":        {"what the session logs and audit log say: completions, the thinking cap rule, cache reuse, tools, approvals (--since D, --json)", runReport},
	"metrics":       {"write the report's figures as a Prometheus textfile into STATE/metrics/ (node_exporter's textfile collector)", runMetrics},
	"status":        {"each role, the model and a session, cache reuse, approvals, fleet memory, anchor age, jobs (read-only, bounded)", runStatus},
	"verify-device": {"the inference host's on-device checks against its llama-server (nix run .#verify-device)", runVerifyDevice},
}

// Main runs bxctl with args (without the program name) and returns the
// exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		usage(stdout)
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
	rest, subs := args[1:], subcommands[args[0]]
	sub := ""
	if len(subs) > 0 && len(rest) > 0 && !isFlag(rest[0]) {
		if sub = rest[0]; !slices.Contains(subs, sub) {
			fmt.Fprintf(stderr, "bxctl %s: unknown subcommand %q (one of: %s)\n%s", args[0], sub, strings.Join(subs, ", "), subUsage(args[0], subs))
			return ExitUsage
		}
	}
	if !wantsHelp(rest) {
		return cmd.run(ctx, rest, stdout, stderr)
	}
	// Only the usage, on stdout: nothing else on the line is acted on
	// (`--state --help` names no state directory).
	if len(subs) > 0 && sub == "" {
		fmt.Fprintf(stdout, "%s%s\nRun bxctl %s <subcommand> -h for its flags.\n", subUsage(args[0], subs), cmd.summary, args[0])
		return ExitOK
	}
	h := []string{"-h"}
	if sub != "" {
		h = []string{sub, "-h"}
	}
	out := &helpOut{w: stdout}
	// What a command says on stderr after its flag set printed the usage
	// (its own one-line usage, a refusal of the missing arguments) is not
	// for someone who asked for help: only the usage is shown.
	code := cmd.run(ctx, h, stdout, &helpErr{Writer: io.Discard, out: out})
	if out.shown {
		return ExitOK
	}
	return code
}

// subUsage is a parent's usage line: each of its subcommands.
func subUsage(name string, subs []string) string {
	lines := make([]string, len(subs))
	for i, s := range subs {
		lines[i] = "bxctl " + name + " " + s + " ..."
	}
	return "usage: " + strings.Join(lines, " | ") + "\n"
}

// isFlag reports an argument that is a flag, not a word.
func isFlag(a string) bool { return strings.HasPrefix(a, "-") }

// wantsHelp reports -h, -help or --help among the flags (before "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// helpErr is the stderr a command gets when help was asked for: errors
// still go to stderr, and a flag set made from it ([flags]) prints its
// usage to out, stdout.
type helpErr struct {
	io.Writer
	out *helpOut
}

// helpOut is stdout for a flag set's usage; shown records that one was
// printed.
type helpOut struct {
	w     io.Writer
	shown bool
}

func (h *helpOut) Write(p []byte) (int, error) {
	h.shown = true
	return h.w.Write(p)
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
	if h, ok := stderr.(*helpErr); ok {
		fs.SetOutput(h.out) // -h: the usage goes to stdout
	}
	return fs
}
