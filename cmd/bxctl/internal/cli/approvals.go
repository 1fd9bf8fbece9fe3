package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// ask sends one message to socket s of the daemon in state directory
// state and wants an answer of type T. A failure reads as the owner
// should see it: the daemon's own refusal escaped, or what went wrong and
// what to do.
func ask[T strict.Variant](ctx context.Context, state string, s *wire.Socket, v strict.Variant) (T, error) {
	t, err := rpc.Ask[T](ctx, s, layout.Socket(state, s), v)
	var refused *wire.Error
	switch {
	case errors.As(err, &refused):
		return t, errors.New(escape.Line(refused.Msg))
	case rpc.Failed(err, rpc.Dialing):
		return t, fmt.Errorf("%v; start Boxmaker with bxctl up", err)
	}
	return t, err
}

// runApprovals is `bxctl approvals`: the calls waiting for the owner, with
// their arguments in full as brokerd holds them (never as loopd described
// them), every character that could hide or fake text escaped.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("approvals", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker, or "+up.DevRoot+"/state as root)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 1 {
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl approvals: %v\n", err)
		return ExitUsage
	}
	if fs.NArg() == 1 {
		return showApproval(ctx, state, fs.Arg(0), stdout, stderr)
	}
	list, err := ask[*wire.Approvals](ctx, state, &wire.Admin, &wire.ListApprovals{})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl approvals: %v\n", err)
		return ExitFailed
	}
	if len(list.Calls) == 0 {
		fmt.Fprintln(stdout, "no calls wait for approval")
		return ExitOK
	}
	for _, c := range list.Calls {
		printCall(stdout, c)
	}
	fmt.Fprintln(stdout, "answer with: bxctl approve ID CODE   or   bxctl refuse ID CODE [reason]")
	return ExitOK
}

func printCall(w io.Writer, c wire.PendingCall) {
	fmt.Fprintf(w, "approval %d: %s in session %s, expires %s, code %s\n  arguments: %s\n",
		c.ID, escape.Line(c.Tool), escape.Line(c.Session), escape.Line(c.Expires), escape.Line(c.Code), escape.JSON(string(c.Arguments)))
}

// showApproval is `bxctl approvals ID`: one waiting call, fetched from
// brokerd by its id (an id seen in the chat is checked here, at the
// source, before the owner answers it).
func showApproval(ctx context.Context, state, arg string, stdout, stderr io.Writer) int {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id < 1 {
		fmt.Fprintf(stderr, "bxctl approvals: %q is not an approval id\n", arg)
		return ExitUsage
	}
	a, err := ask[*wire.Approval](ctx, state, &wire.Admin, &wire.GetApproval{ID: id})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl approvals: %v\n", err)
		return ExitFailed
	}
	printCall(stdout, a.Call)
	return ExitOK
}

// runApprove is `bxctl approve ID CODE`. The owner types the id and the
// code bxctl approvals shows; nothing is approved by a bare yes, nor by
// an id read off a post that only looks like an approval.
func runApprove(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return answerApproval(ctx, "approve", args, stdout, stderr)
}

// runRefuse is `bxctl refuse ID CODE [reason]` (and `bxctl deny`).
func runRefuse(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return answerApproval(ctx, "refuse", args, stdout, stderr)
}

func answerApproval(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) int {
	scope := wire.ScopeCall
	if verb == "approve" {
		// --session and --session-dir may follow ID and CODE, where the
		// flag package stops reading flags.
		var rest []string
		for _, a := range args {
			switch strings.TrimLeft(a, "-") {
			case "session":
				scope = wire.ScopeSession
				continue
			case "session-dir":
				scope = wire.ScopeSessionDir
				continue
			case "always":
				scope = wire.ScopeAlways
				continue
			}
			rest = append(rest, a)
		}
		args = rest
	}
	fs := flags(verb, stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker, or "+up.DevRoot+"/state as root)")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	rest := fs.Args()
	if len(rest) < 2 || (verb == "approve" && len(rest) != 2) {
		fmt.Fprintf(stderr, "bxctl %s: usage: bxctl %s ID CODE%s (the code is in bxctl approvals)\n", verb, verb, map[string]string{"approve": " [--session | --session-dir | --always]", "refuse": " [reason]"}[verb])
		return ExitUsage
	}
	id, err := strconv.ParseInt(rest[0], 10, 64)
	if err != nil || id < 1 {
		fmt.Fprintf(stderr, "bxctl %s: %q is not an approval id (a positive number, from bxctl approvals)\n", verb, rest[0])
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %s: %v\n", verb, err)
		return ExitUsage
	}
	code, err := wire.ParseApprovalCode(rest[1])
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %s: %q: %v (bxctl approvals %d shows it); see docs/runbook.md#approval-code-wrong\n", verb, escape.Line(rest[1]), err, id)
		return ExitUsage
	}
	var msg strict.Variant = &wire.Approve{ID: id, Code: code, Scope: scope}
	if verb == "refuse" {
		msg = &wire.Refuse{ID: id, Code: code, Reason: strings.Join(rest[2:], " ")}
	}
	a, err := ask[*wire.Answered](ctx, state, &wire.Admin, msg)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %s: %v\n", verb, err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "approval %d: %s\n", a.ID, escape.Line(a.Msg))
	return ExitOK
}
