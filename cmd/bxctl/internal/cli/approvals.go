package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/escape"
	"wntrmute.dev/boxmaker/pkg/frame"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// adminSocket is brokerd's admin.sock in a state directory.
func adminSocket(state string) string { return filepath.Join(socketDir(state, "admin"), "admin.sock") }

// admin sends one message on admin.sock and returns the answer.
func admin(ctx context.Context, state string, v strict.Variant) (strict.Variant, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := sockets.Dial(ctx, adminSocket(state))
	if err != nil {
		return nil, fmt.Errorf("brokerd is not running (%v); start Boxmaker with bxctl up", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	b, err := wire.BrokerMessages.Encode(v)
	if err == nil {
		err = frame.Write(c, b, wire.BrokerFrameMax)
	}
	if err != nil {
		return nil, err
	}
	body, err := frame.Read(c, wire.BrokerFrameMax)
	if err != nil {
		return nil, fmt.Errorf("brokerd did not answer: %v", err)
	}
	out, err := wire.BrokerMessages.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("brokerd broke the protocol: %v", err)
	}
	if e, ok := out.(*wire.Error); ok {
		return nil, fmt.Errorf("%s", escape.Line(e.Msg))
	}
	return out, nil
}

// adminAs sends one message on admin.sock and wants an answer of type T.
func adminAs[T strict.Variant](ctx context.Context, state string, v strict.Variant) (T, error) {
	var zero T
	out, err := admin(ctx, state, v)
	if err != nil {
		return zero, err
	}
	t, ok := out.(T)
	if !ok {
		return zero, fmt.Errorf("brokerd answered %s", out.Tag())
	}
	return t, nil
}

// runApprovals is `bxctl approvals`: the calls waiting for the owner, with
// their arguments in full as brokerd holds them (never as loopd described
// them), every character that could hide or fake text escaped.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("approvals", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
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
	list, err := adminAs[*wire.Approvals](ctx, state, &wire.ListApprovals{})
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
	fmt.Fprintln(stdout, "answer with: bxctl approve ID   or   bxctl refuse ID [reason]")
	return ExitOK
}

func printCall(w io.Writer, c wire.PendingCall) {
	fmt.Fprintf(w, "approval %d: %s in session %s, expires %s\n  arguments: %s\n",
		c.ID, escape.Line(c.Tool), escape.Line(c.Session), escape.Line(c.Expires), escape.JSON(string(c.Arguments)))
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
	a, err := adminAs[*wire.Approval](ctx, state, &wire.GetApproval{ID: id})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl approvals: %v\n", err)
		return ExitFailed
	}
	printCall(stdout, a.Call)
	return ExitOK
}

// runApprove is `bxctl approve ID`. The owner types the id; nothing is
// approved by a bare yes.
func runApprove(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return answerApproval(ctx, "approve", args, stdout, stderr)
}

// runRefuse is `bxctl refuse ID [reason]` (and `bxctl deny`).
func runRefuse(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return answerApproval(ctx, "refuse", args, stdout, stderr)
}

func answerApproval(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) int {
	fs := flags(verb, stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 || (verb == "approve" && len(rest) != 1) {
		fmt.Fprintf(stderr, "bxctl %s: usage: bxctl %s ID%s\n", verb, verb, map[string]string{"approve": "", "refuse": " [reason]"}[verb])
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
	var msg strict.Variant = &wire.Approve{ID: id}
	if verb == "refuse" {
		msg = &wire.Refuse{ID: id, Reason: strings.Join(rest[1:], " ")}
	}
	a, err := adminAs[*wire.Answered](ctx, state, msg)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %s: %v\n", verb, err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "approval %d: %s\n", a.ID, escape.Line(a.Msg))
	return ExitOK
}
