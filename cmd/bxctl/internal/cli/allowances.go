package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// runAllowances is `bxctl allowances` (the live session allowances, each
// with its exact scope and when it ends at the latest) and `bxctl
// allowances revoke ID` (end one now).
func runAllowances(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("allowances", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	rest := fs.Args()
	if len(rest) != 0 && (len(rest) != 2 || rest[0] != "revoke") {
		fmt.Fprintln(stderr, "bxctl allowances: usage: bxctl allowances [revoke ID]")
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl allowances: %v\n", err)
		return ExitUsage
	}
	if len(rest) == 2 {
		id, err := strconv.ParseInt(rest[1], 10, 64)
		if err != nil || id < 1 {
			fmt.Fprintf(stderr, "bxctl allowances revoke: %q is not an allowance id (a positive number, from bxctl allowances)\n", escape.Line(rest[1]))
			return ExitUsage
		}
		a, err := ask[*wire.Answered](ctx, state, &wire.Admin, &wire.RevokeAllowance{ID: id})
		if err != nil {
			fmt.Fprintf(stderr, "bxctl allowances revoke: %v\n", err)
			return ExitFailed
		}
		fmt.Fprintln(stdout, escape.Line(a.Msg))
		return ExitOK
	}
	list, err := ask[*wire.Allowances](ctx, state, &wire.Admin, &wire.ListAllowances{})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl allowances: %v\n", err)
		return ExitFailed
	}
	if len(list.Allowances) == 0 {
		fmt.Fprintln(stdout, "no session allowances are live")
		return ExitOK
	}
	for _, a := range list.Allowances {
		fmt.Fprintf(stdout, "allowance %d: session %s, epoch %d, grant %s, by %s at %s, ends by %s\n  %s\n",
			a.ID, escape.Line(a.Session), a.Epoch, escape.Line(a.Grant), escape.Line(a.Approver), escape.Line(a.Made), escape.Line(a.Expires), escape.Line(a.Scope))
	}
	fmt.Fprintln(stdout, "each also ends when its session's epoch ends, its grant changes or the session becomes more tainted; end one now with: bxctl allowances revoke ID")
	return ExitOK
}
