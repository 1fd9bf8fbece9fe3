package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"wntrmute.dev/boxmaker/pkg/audit"
	"wntrmute.dev/boxmaker/pkg/escape"
)

// runAudit is `bxctl audit verify DIR`: the same chain check brokerd runs,
// over the whole log, read-only, so the owner can check the log while
// brokerd refuses to start, or on a copy. It prints one line: the summary
// (files, records, last seq, head hash) and exits 0, or the first break as
// DIR/file:line: reason and exits 1. The reason can quote bytes from the
// log, so it is escaped like everything else bxctl prints.
func runAudit(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, "usage: bxctl audit verify DIR")
		return ExitUsage
	}
	fs := flags("audit verify", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bxctl audit verify DIR")
		fmt.Fprintln(stderr, "Checks the hash chain of the audit log in DIR (brokerd's state/audit) without writing.")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return ExitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "bxctl audit verify: takes exactly one argument, the audit directory")
		fs.Usage()
		return ExitUsage
	}
	dir := fs.Arg(0)
	r := audit.Verify(dir)
	if p := r.Problem; p != nil {
		shown := *p
		if shown.File != "" {
			shown.File = filepath.Join(dir, shown.File)
		}
		fmt.Fprintln(stdout, escape.Line(shown.Error()))
		return ExitFailed
	}
	fmt.Fprintln(stdout, escape.Line(r.Summary()))
	return ExitOK
}
