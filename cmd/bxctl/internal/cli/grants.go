package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// consultNote says, for a consult grant that allows or asks, which memory
// text it lets leave the owner's hosts (its memory key), and "" for any
// other grant. Every session holds the identity files, so a grant that
// lets none out allows no consult: the owner must read that here, not
// first in a refusal.
func consultNote(g grant.Grant) string {
	if g.Tool() != toolset.Consult || g.Mode() == grant.Deny {
		return ""
	}
	head := fmt.Sprintf("note: %s: consult grant %s (mode %s)", g.File(), g.ID(), g.Mode())
	var what string
	switch g.Memory() {
	case grant.IdentityMayLeave:
		what = "lets the identity files (memory/soul.md, memory.md, user.md, in every prompt) leave in a consult's question or context; a session that has recalled memory is refused (consult-recalled)"
	case grant.AllMayLeave:
		what = "lets all memory text leave in a consult's question or context: the identity files and whatever recall and ask_memory returned (notes, past sessions, fleet memory)"
	default:
		return head + ` lets no memory text leave, so it allows no consult: every session's prompt holds the identity files; add memory = "identity_may_leave" if they may go to this endpoint; see docs/runbook.md#consult-identity`
	}
	if g.Mode() == grant.Auto {
		what += "; mode auto: each body leaves without your reading it (the consult log keeps it in full)"
	}
	return head + " " + what
}

// runGrants is `bxctl grants check [--list] [--owner-uid N] DIR`: it loads
// a grant directory offline with the loader brokerd uses, so a directory
// it accepts is one brokerd (whose owner_uid is N, by default the uid
// running bxctl) accepts, owners and modes included. It prints a one-line summary and exits
// 0, or one line per problem (file, grant, reason) and exits 1: one
// problem makes the whole directory invalid, and brokerd would deny every
// call until it is fixed. For each consult grant that is not a deny it
// also prints a note: line saying which memory text the grant lets leave.
func runGrants(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const use = "usage: bxctl grants check [--list] [--owner-uid N] DIR | proposals | apply ID | drop ID | suggest [--write]"
	if len(args) > 0 {
		switch args[0] {
		case "proposals":
			return runProposals(args[1:], stdout, stderr)
		case "apply":
			return runApply(ctx, args[1:], stdout, stderr)
		case "drop":
			return runDrop(ctx, args[1:], stdout, stderr)
		case "suggest":
			return runSuggest(ctx, args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, use)
		return ExitUsage
	}
	fs := flags("grants check", stderr)
	list := fs.Bool("list", false, "also print each grant: file, id, tool, mode and sha256")
	owner := fs.Int("owner-uid", os.Getuid(), "the owner's uid, as brokerd.toml's owner_uid: grant files must be owned by root or this uid")
	if err := fs.Parse(args[1:]); err != nil {
		return ExitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "bxctl grants check: one grant directory is required")
		fmt.Fprintln(stderr, use)
		return ExitUsage
	}
	if *owner < 0 || int64(*owner) > math.MaxUint32 {
		fmt.Fprintf(stderr, "bxctl grants check: --owner-uid %d is not a uid\n", *owner)
		return ExitUsage
	}
	dir := fs.Arg(0)
	set, err := grant.LoadDir(dir, ownership.Trust(uint32(*owner)))
	if err != nil {
		var le *grant.LoadError
		if !errors.As(err, &le) {
			fmt.Fprintf(stderr, "bxctl grants check: %v\n", err)
			return ExitFailed
		}
		for _, p := range le.Problems {
			fmt.Fprintln(stdout, p)
		}
		fmt.Fprintf(stderr, "bxctl grants check: %d problems in %s; brokerd would deny every call (grants_invalid); see docs/runbook.md#grants-invalid\n", len(le.Problems), dir)
		return ExitFailed
	}
	now := time.Now()
	expired := 0
	for _, g := range set.Grants() {
		if !g.ActiveAt(now) {
			expired++
		}
		if *list {
			fmt.Fprintf(stdout, "%s %s %s %s %s\n", g.File(), g.ID(), g.Tool(), g.Mode(), g.SHA256())
		}
	}
	for _, g := range set.Grants() {
		if n := consultNote(g); n != "" {
			fmt.Fprintln(stdout, n)
		}
	}
	summary := fmt.Sprintf("ok: %d files, %d grants", len(set.Files()), set.Len())
	if expired > 0 {
		summary += fmt.Sprintf(" (%d expired, which match nothing)", expired)
	}
	fmt.Fprintln(stdout, summary)
	return ExitOK
}
