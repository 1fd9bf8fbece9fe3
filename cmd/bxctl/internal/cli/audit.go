package cli

import (
	"context"
	"fmt"
	"io"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
)

// runAudit is `bxctl audit verify|anchor`. verify is the same chain check
// brokerd runs, over the whole log, read-only, so the owner can check the
// log while brokerd refuses to start, or on a copy (with its audit.head);
// it also checks the log's end against brokerd's head record and against
// each of the owner's anchors (audit_anchor.go). It prints the summary
// (files, records, last seq, head hash, anchors) and exits 0, or one line
// per problem (the first break as DIR/file:line: reason, a head that
// differs, each anchor the log fails) and exits 1. The reasons can quote
// bytes from the log, so they are escaped like everything else bxctl
// prints. The consult log beside DIR (DIR/../consult), if there is one,
// is checked too, against its own head record (DIR/../consult.head) and
// its anchors in the same file (consult.go).
func runAudit(_ context.Context, args []string, stdout, stderr io.Writer) int {
	const use = "usage: bxctl audit verify [--anchors FILE] DIR | bxctl audit anchor [--anchors FILE] DIR"
	if len(args) > 0 && args[0] == "anchor" {
		return runAuditAnchor(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, use)
		return ExitUsage
	}
	fs := flags("audit verify", stderr)
	anchors := fs.String("anchors", "", "the owner's anchors file (default $XDG_STATE_HOME/boxmaker/"+anchorsName+")")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: bxctl audit verify [--anchors FILE] DIR")
		fmt.Fprintln(fs.Output(), "Checks the hash chain of the audit log in DIR (brokerd's state/audit), its end against brokerd's head record (DIR.head) and your anchors, and the consult log beside it (DIR/../consult, DIR/../consult.head) the same way, without writing.")
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
	_, _, mine, code := anchorsFor(*anchors, dir, stderr, "audit verify")
	if code != ExitOK {
		return code
	}
	e := audit.VerifyEnd(dir, mine)
	printEnd(stdout, dir, e)
	consultOK := verifyConsultLog(stdout, stderr, dir, *anchors)
	if !e.OK() || !consultOK {
		return ExitFailed
	}
	return ExitOK
}
