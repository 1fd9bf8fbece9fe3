package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"wntrmute.dev/boxmaker/pkg/grant"
	"wntrmute.dev/boxmaker/pkg/ownership"
)

// runGrants is `bxctl grants check [--list] [--owner-uid N] DIR`: it loads
// a grant directory offline with the loader brokerd uses, so a directory
// it accepts is one brokerd (whose owner_uid is N, by default the uid
// running bxctl) accepts, owners and modes included. It prints a one-line summary and exits
// 0, or one line per problem (file, grant, reason) and exits 1: one
// problem makes the whole directory invalid, and brokerd would deny every
// call until it is fixed.
func runGrants(_ context.Context, args []string, stdout, stderr io.Writer) int {
	const use = "usage: bxctl grants check [--list] [--owner-uid N] DIR"
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
	summary := fmt.Sprintf("ok: %d files, %d grants", len(set.Files()), set.Len())
	if expired > 0 {
		summary += fmt.Sprintf(" (%d expired, which match nothing)", expired)
	}
	fmt.Fprintln(stdout, summary)
	return ExitOK
}
