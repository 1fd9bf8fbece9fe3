package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// runCompact is bxctl compact SESSION: loopd changes the session's epoch
// now (only while no turn runs in it), and bxctl prints the new epoch
// and the summary it starts from, escaped (it is model text).
func runCompact(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("compact", stderr)
	stateFlag := fs.String("state", "", "Boxmaker's state `DIR` (default $BOXMAKER_STATE, else ./.boxmaker, or "+up.DevRoot+"/state as root)")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "bxctl compact: give one session id: bxctl compact SESSION")
		fs.Usage()
		return ExitUsage
	}
	id := fs.Arg(0)
	if err := wire.CheckSessionID(id); err != nil {
		fmt.Fprintf(stderr, "bxctl compact: %v\n", err)
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl compact: %v\n", err)
		return ExitUsage
	}
	done, err := rpc.Ask[*wire.Compacted](ctx, &wire.Loop, layout.Socket(state, &wire.Loop), &wire.Compact{Session: id})
	var refused *wire.Error
	switch {
	case errors.As(err, &refused):
		fmt.Fprintf(stderr, "bxctl compact: %s\n", escape.Line(refused.Msg))
		return ExitFailed
	case err != nil:
		fmt.Fprintf(stderr, "bxctl compact: %v; start Boxmaker with bxctl up, or pass --state DIR; see docs/runbook.md#loopd-not-running\n", err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "session %s is now in epoch %d; it goes on from this summary:\n%s\n", escape.Line(done.Session), done.Epoch, escape.Text(done.Summary))
	return ExitOK
}
