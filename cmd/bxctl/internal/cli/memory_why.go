package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// memoryWhy is `bxctl memory why ID`: memoryd's chain from its own files
// (the note, the journal, the session log), then the links only
// brokerd's audit log holds, read here, read-only, with package audit:
// the memory call's decision and the tool result that made the session
// untrusted, each by its seq and line hash. memoryd cannot read
// broker/audit; the owner running bxctl can, like `bxctl audit verify`.
func memoryWhy(ctx context.Context, state, id string, stdout, stderr io.Writer) int {
	c, err := ask[*wire.WhyChain](ctx, state, &wire.Memadmin, &wire.MemoryWhy{ID: id})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl memory why: %v\n", err)
		return ExitFailed
	}
	printWhy(c, auditLinks(layout.Audit.In(state), c), stdout)
	return ExitOK
}

// printWhy writes a chain and its audit links.
func printWhy(c *wire.WhyChain, links []string, stdout io.Writer) {
	fmt.Fprintf(stdout, "why %s:\n", escape.Line(c.ID))
	for _, s := range c.Steps {
		fmt.Fprintf(stdout, "  %s\n", escape.Line(s))
	}
	for _, s := range links {
		fmt.Fprintf(stdout, "  audit: %s\n", escape.Line(s))
	}
}

// whySlack is how far a note's time (memoryd's clock, to the second)
// may be from its call's decision (brokerd's, before the call ran).
const whySlack = 2 * time.Second

// auditLinks finds, in the audit log at dir, the memory call that wrote
// the chain's entry (the decision whose result has the chain's output
// hash; failing that, the session's last allowed memory decision at or
// before the entry's time) and the first untrusted result of the session
// before it. It never writes; an unreadable log is one line saying so.
func auditLinks(dir string, c *wire.WhyChain) []string {
	session, at := c.Session, c.At
	if session == "" || session == wire.OwnerSession {
		return nil
	}
	when, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return []string{fmt.Sprintf("the entry's time %q does not parse, so its audit records were not looked up", at)}
	}
	until := when.Add(whySlack).UTC().Format(audit.TimeLayout)
	type call struct {
		rec  audit.DecisionRecord
		seq  int64
		hash string
	}
	calls := map[int64]call{}
	var write, exact *call
	var tainted []string
	err = audit.Records(dir, func(r audit.Record, hash string) error {
		if r.Head().Time > until {
			return nil
		}
		switch r := r.(type) {
		case *audit.Decision:
			if r.Record.Session != session {
				return nil
			}
			c := call{r.Record, r.Seq, hash}
			calls[r.Seq] = c
			if r.Record.Tool == "memory" && r.Record.Outcome == audit.Allowed {
				write = &c
			}
		case *audit.Result:
			d, ok := calls[r.Decision]
			if ok && c.Output != "" && r.SHA256 == c.Output && d.rec.Tool == "memory" && exact == nil {
				exact = &d
			}
			if !ok || !r.Untrusted || len(tainted) > 0 {
				return nil
			}
			tainted = append(tainted,
				fmt.Sprintf("the session became untrusted by the %s result: result seq %d (line hash %s), output sha256 %s, %d bytes, class %s, untrusted",
					d.rec.Tool, r.Seq, hash, r.SHA256, r.Size, r.Class),
				fmt.Sprintf("  of the call decided at seq %d (line hash %s): %s %s, grant %s",
					d.seq, d.hash, d.rec.Tool, truncate.Ellipsis(string(d.rec.Arguments), 300), grantOf(d.rec.Grant)))
		}
		return nil
	})
	if err != nil {
		return []string{fmt.Sprintf("%s could not be read (%v), so the links only the audit log holds are missing; run bxctl as a user that can read it; see docs/runbook.md#memory-why-audit-unreadable", dir, err)}
	}
	var out []string
	how := "matched by its result's hash"
	if exact != nil {
		write = exact
	} else {
		how = "matched by time: the session's last memory call before the entry"
	}
	if write != nil {
		trust := "trusted"
		if write.rec.Untrusted {
			trust = "untrusted"
		}
		out = append(out, fmt.Sprintf("the memory call: decision seq %d (line hash %s, %s), session %s %s, taint %s when brokerd decided it",
			write.seq, write.hash, how, session, trust, write.rec.Taint))
	} else {
		out = append(out, fmt.Sprintf("no allowed memory call of session %s is in the audit log up to %s", session, at))
	}
	if len(tainted) == 0 {
		tainted = []string{fmt.Sprintf("no untrusted tool result of session %s is in the audit log up to %s", session, at)}
	}
	return append(out, tainted...)
}

func grantOf(g *audit.GrantRef) string {
	if g == nil {
		return "none"
	}
	return g.ID
}
