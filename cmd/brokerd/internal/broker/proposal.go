package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/ledger"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/pending"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// An `always` answer approves the call and writes a grant proposal: a
// standing grant (package grant, standing.go) narrowed exactly as a
// session allowance is, in proposals/<id>.toml, never in grants/, which
// brokerd cannot write and never will. The owner applies it with `bxctl
// grants apply ID`, as the owner; until then it changes nothing.

// maxPastCalls caps the past calls a proposal's comment lists.
const maxPastCalls = 20

// propose writes the proposal for approval seq and says what happened.
func (b *Broker) propose(seq int64, a pending.Answer, ask *policy.Ask, dec policy.Decision, gs *grant.Set) string {
	scope, err := policy.ScopeOf(ask, false)
	if err != nil || (scope.Tool != toolset.ReadFile && scope.Tool != toolset.HTTPFetch) {
		return "this call only: no proposal can be made for it; see docs/runbook.md#allowance-refused"
	}
	winner := dec.Grant()
	maxTaint := ""
	for _, g := range gs.Grants() {
		if g.ID() == winner.ID {
			maxTaint = g.MaxTaint().String()
		}
	}
	if maxTaint == "" {
		return "this call only: its grant is gone; no proposal was made"
	}
	past, total, err := b.pastCalls(scope)
	if err != nil {
		b.log.Warn("proposal: the audit log could not be read for past calls", "approval", seq, "err", err.Error())
	}
	text := proposalText(seq, a.Approver, scope, winner.ID, maxTaint, dec, past, total)
	if gs, ps := grant.ParseFile("proposal.toml", []byte(text)); len(ps) > 0 || len(gs) != 1 || !gs[0].Standing() {
		b.log.Error("proposal: brokerd wrote a grant its own loader refuses; nothing written", "approval", seq, "problems", fmt.Sprint(ps))
		return "this call only: the proposal did not parse (a bug); nothing was written"
	}
	path, err := b.writeProposal(seq, text)
	if err != nil {
		b.log.Error("proposal not written", "approval", seq, "err", err.Error())
		return "this call only: the grant proposal could not be written (" + err.Error() + "); see docs/runbook.md#proposal-unwritten"
	}
	b.log.Info("grant proposal written", "approval", seq, "file", path, "scope", ScopeText(scope))
	return fmt.Sprintf("a grant proposal was written, not applied: %s would run without asking; it changes nothing until you run `bxctl grants apply %d` on the host (`bxctl grants proposals` lists it, `bxctl grants drop %d` drops it)",
		ScopeText(scope), seq, seq)
}

// pastCalls are the audit log's earlier decisions scope covers (asked or
// allowed), at most maxPastCalls of them, and how many there were.
func (b *Broker) pastCalls(scope audit.Scope) ([]string, int, error) {
	var out []string
	total := 0
	err := ledger.ScanDecisions(layout.Audit.In(b.cfg.StateDir), func(d *audit.Decision) {
		r := d.Record
		if r.Tool != scope.Tool || r.Outcome == audit.Denied {
			return
		}
		args, err := toolargs.Parse(r.Tool, r.Arguments)
		if err != nil || !policy.Covers(scope, args) {
			return
		}
		total++
		if len(out) < maxPastCalls {
			out = append(out, fmt.Sprintf("seq %d (%s, %s, session %s)", d.Seq, d.Time, r.Outcome, r.Session))
		}
	})
	return out, total, err
}

func proposalText(seq int64, approver string, scope audit.Scope, winner, maxTaint string, dec policy.Decision, past []string, total int) string {
	var b strings.Builder
	comment := func(format string, a ...any) {
		line := fmt.Sprintf(format, a...)
		line = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' {
				return '?'
			}
			return r
		}, line)
		b.WriteString("# " + line + "\n")
	}
	comment("Grant proposal from approval %d (`!approve %d CODE always`, by %s).", seq, seq, approver)
	comment("It approves for good, without asking: %s,", ScopeText(scope))
	comment("where grant %q asks. A deny grant still wins; its result keeps that grant's class.", winner)
	comment("Nothing changes until the owner runs `bxctl grants apply %d` (brokerd never writes grants/).", seq)
	comment("Past calls in the audit log it would have covered: %d.", total)
	for _, p := range past {
		comment("  %s", p)
	}
	if total > len(past) {
		comment("  ... and %d more", total-len(past))
	}
	fmt.Fprintf(&b, "[[grant]]\nid = %s\ntool = %s\n", config.Quote("always-"+strconv.FormatInt(seq, 10)), config.Quote(scope.Tool))
	if scope.Tool == toolset.HTTPFetch {
		fmt.Fprintf(&b, "hosts = [%s]\n", config.Quote(scope.Host))
	} else {
		fmt.Fprintf(&b, "paths = [%s]\n", config.Quote(scope.Path))
	}
	fmt.Fprintf(&b, "max_taint = %s\nresult_class = %s\nuntrusted = %t\nmode = \"auto\"\nstanding = true\n",
		config.Quote(maxTaint), config.Quote(dec.Class().String()), dec.Untrusted())
	return b.String()
}

// writeProposal writes proposals/<seq>.toml whole (a temporary file,
// fsynced, renamed), mode 0640, and returns its path.
func (b *Broker) writeProposal(seq int64, text string) (string, error) {
	dir := layout.Proposals.In(b.cfg.StateDir)
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	path := filepath.Join(dir, strconv.FormatInt(seq, 10)+".toml")
	f, err := os.CreateTemp(dir, ".proposal-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(text)
	if err == nil {
		err = f.Chmod(0o640)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return path, os.Rename(f.Name(), path)
}

// dropProposal deletes proposal id at the owner's word.
func (b *Broker) dropProposal(id int64) strict.Variant {
	path := filepath.Join(layout.Proposals.In(b.cfg.StateDir), strconv.FormatInt(id, 10)+".toml")
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return wire.Errorf("drop_proposal", wire.Invalid, "there is no grant proposal %d (bxctl grants proposals lists them)", id)
		}
		return wire.Errorf("drop_proposal", wire.Unavailable, "grant proposal %d could not be dropped: %v", id, err)
	}
	b.log.Info("grant proposal dropped", "proposal", id)
	return &wire.Answered{ID: id, Outcome: "dropped", Msg: fmt.Sprintf("grant proposal %d dropped", id)}
}
