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
	path, err := b.writeProposal(seq, text, true)
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
// fsynced, renamed; linked instead unless replace, so that an existing
// proposal stays as it is), mode 0640, and returns its path.
func (b *Broker) writeProposal(seq int64, text string, replace bool) (string, error) {
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
	if !replace {
		return path, os.Link(f.Name(), path)
	}
	return path, os.Rename(f.Name(), path)
}

// writeSuggested writes grant proposal id from `bxctl grants suggest
// --write` (admin.sock: the owner). The text must be exactly one
// standing grant named always-<id>, and seq id in the audit log a call
// brokerd asked the owner about, or that a session allowance decided, of
// the same tool on exactly the target the grant names: brokerd writes
// no proposal for a target no call of its own had. It never replaces a
// proposal.
func (b *Broker) writeSuggested(id int64, text string) strict.Variant {
	refuse := func(format string, a ...any) strict.Variant {
		return wire.Errorf("write_proposal", wire.Invalid, "grant proposal %d not written: "+format+"; see docs/runbook.md#proposal-refused", append([]any{id}, a...)...)
	}
	if id < 1 || len(text) > wire.MaxProposalText {
		return refuse("a proposal has a positive id and at most %d bytes", wire.MaxProposalText)
	}
	want := "always-" + strconv.FormatInt(id, 10)
	gs, ps := grant.ParseFile(fmt.Sprintf("proposal %d", id), []byte(text))
	switch {
	case len(ps) > 0:
		return refuse("it does not parse: %s", ps[0])
	case len(gs) != 1 || gs[0].ID() != want || !gs[0].Standing():
		return refuse("it is not one standing grant with id %q", want)
	}
	g := gs[0]
	var target string
	if g.Tool() == toolset.HTTPFetch {
		target = g.Hosts()[0].String()
	} else {
		target = g.Paths()[0].String()
	}
	found := false
	err := ledger.ScanDecisions(layout.Audit.In(b.cfg.StateDir), func(d *audit.Decision) {
		r := d.Record
		if d.Seq != id || r.Tool != g.Tool() || (r.Outcome != audit.Ask && (r.Outcome != audit.Allowed || r.Allowance == 0)) {
			return
		}
		switch a, _ := toolargs.Parse(r.Tool, r.Arguments); a := a.(type) {
		case toolargs.ReadFile:
			found = a.Path.String() == target
		case toolargs.HTTPFetch:
			found = a.URL.Host().String() == target
		}
	})
	if err != nil {
		return wire.Errorf("write_proposal", wire.Unavailable, "grant proposal %d not written: the audit log could not be read: %v; see docs/runbook.md#audit-unavailable", id, err)
	}
	if !found {
		return refuse("the audit log holds no asked or allowance-decided %s call on exactly %q as seq %d", g.Tool(), target, id)
	}
	path, err := b.writeProposal(id, text, false)
	switch {
	case errors.Is(err, os.ErrExist):
		return refuse("proposals/%d.toml exists already (bxctl grants proposals shows it; bxctl grants drop %d drops it)", id, id)
	case err != nil:
		b.log.Error("suggested proposal not written", "proposal", id, "err", err.Error())
		return wire.Errorf("write_proposal", wire.Unavailable, "grant proposal %d could not be written: %v; see docs/runbook.md#proposal-unwritten", id, err)
	}
	b.log.Info("grant proposal written from bxctl grants suggest", "proposal", id, "file", path, "tool", g.Tool())
	return &wire.Answered{ID: id, Outcome: "written", Msg: fmt.Sprintf("grant proposal %d written to %s: it changes nothing until you run `bxctl grants apply %d`", id, path, id)}
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
