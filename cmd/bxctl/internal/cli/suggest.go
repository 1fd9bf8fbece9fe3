package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// `bxctl grants suggest` reads the audit log and proposes standing grants
// for the calls the owner approved repeatedly: same tool, same narrowed
// target (one file, one host), at least --min times, counting approvals
// and calls a session allowance decided. It never proposes a shell line
// (a grant cannot name one, and interpreters given code are what "always"
// must never cover), a file to write, a consult, egress to a host no
// grant names, or anything a deny grant covers: each of those is listed
// as not proposed, with why. It prints; it changes nothing, unless
// --write: then brokerd writes each suggestion as a grant proposal in
// proposals/ (never grants/), exactly as an `always` answer's, which
// `bxctl grants apply N` applies.

// candidate is one narrowed target and the approved calls on it.
type candidate struct {
	tool, target string // target: the file, host, or "LINE in WORKDIR"
	grant        string // the ask grant the approvals rode on (the latest)
	seqs         []int64
}

func (c *candidate) key() string { return c.tool + "\x00" + c.target }

// id is the proposal id of c's suggestion: the seq of its latest call,
// which brokerd checks against its audit log before it writes one.
func (c *candidate) id() int64 { return c.seqs[len(c.seqs)-1] }

// runSuggest is `bxctl grants suggest [--state DIR] [--grants DIR] [--min N] [--write]`.
func runSuggest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("grants suggest", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	grantsFlag := fs.String("grants", "", "grant `directory` (default STATE/grants)")
	auditFlag := fs.String("audit", "", "audit log `directory` (default STATE/broker/audit)")
	min := fs.Int("min", 3, "propose a target approved at least `N` times")
	owner := fs.Int("owner-uid", os.Getuid(), "the owner's uid, as brokerd.toml's owner_uid")
	write := fs.Bool("write", false, "have brokerd write each suggestion as a grant proposal in proposals/ (bxctl grants apply N applies one)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *min < 1 || *owner < 0 {
		fmt.Fprintln(stderr, "usage: bxctl grants suggest [--state DIR] [--grants DIR] [--audit DIR] [--min N] [--write]")
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl grants suggest: %v\n", err)
		return ExitUsage
	}
	gdir, adir := *grantsFlag, *auditFlag
	if gdir == "" {
		gdir = layout.Grants.In(state)
	}
	if adir == "" {
		adir = layout.Audit.In(state)
	}
	set, err := grant.LoadDir(gdir, ownership.Trust(uint32(*owner)))
	if err != nil {
		fmt.Fprintf(stderr, "bxctl grants suggest: grants/ is invalid, so nothing can be checked against it: %v; see docs/runbook.md#grants-invalid\n", err)
		return ExitFailed
	}
	cands, err := approvedTargets(adir)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl grants suggest: reading the audit log: %v\n", err)
		return ExitFailed
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if len(cands[i].seqs) != len(cands[j].seqs) {
			return len(cands[i].seqs) > len(cands[j].seqs)
		}
		return cands[i].key() < cands[j].key()
	})
	n, written, failed := 0, 0, 0
	var skipped []string
	for _, c := range cands {
		if len(c.seqs) < *min {
			continue
		}
		head := fmt.Sprintf("%s %s, approved %d times (%s)", c.tool, escape.Line(c.target), len(c.seqs), seqList(c.seqs))
		text, why := suggestion(c, set)
		if why != "" {
			skipped = append(skipped, "# not proposed: "+head+": "+why)
			continue
		}
		n++
		fmt.Fprintf(stdout, "# suggestion %d: %s\n%s\n", n, head, text)
		if !*write {
			continue
		}
		outcome, msg := writeSuggestion(ctx, state, c, head, text)
		switch outcome {
		case "written", "already proposed":
			written++
		default:
			failed++
		}
		fmt.Fprintf(stdout, "# %s: %s\n\n", outcome, msg)
	}
	for _, s := range skipped {
		fmt.Fprintln(stdout, s)
	}
	switch {
	case n == 0:
		fmt.Fprintf(stdout, "# no target was approved %d times or more that a standing grant may cover\n", *min)
	case !*write:
		fmt.Fprintln(stdout, "# nothing was written: --write has brokerd write them as grant proposals (then bxctl grants proposals, bxctl grants apply N)")
	default:
		fmt.Fprintf(stdout, "# %d of %d written as grant proposals in proposals/, never grants/: bxctl grants proposals shows them, bxctl grants apply N applies one\n", written, n)
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "bxctl grants suggest: %d of %d suggestions were not written (each says why above); see docs/runbook.md#suggest-not-written\n", failed, n)
		return ExitFailed
	}
	return ExitOK
}

// writeSuggestion has brokerd write suggestion c (its grant text) as
// grant proposal c.id(), with a comment saying where it came from, unless
// that proposal exists already (an `always` answer to that call, or an
// earlier --write); it returns "written", "already proposed" or "not
// written", and why.
func writeSuggestion(ctx context.Context, state string, c candidate, head, text string) (string, string) {
	id := c.id()
	if _, err := os.Lstat(proposalPath(state, id)); err == nil {
		return "already proposed", fmt.Sprintf("proposal %d exists (bxctl grants proposals shows it)", id)
	}
	var b strings.Builder
	for _, l := range []string{
		"Grant proposal from bxctl grants suggest: " + head + ".", // head is escaped already
		"It approves for good, without asking, what grant " + escape.Line(c.grant) + " asks about; a deny grant still wins.",
		fmt.Sprintf("Nothing changes until the owner runs `bxctl grants apply %d` (brokerd never writes grants/).", id),
	} {
		b.WriteString("# " + l + "\n")
	}
	b.WriteString(text)
	a, err := ask[*wire.Answered](ctx, state, &wire.Admin, &wire.WriteProposal{ID: id, Text: b.String()})
	if err != nil {
		return "not written", fmt.Sprintf("proposal %d: %v", id, err)
	}
	return "written", escape.Line(a.Msg)
}

func seqList(seqs []int64) string {
	var parts []string
	for i, s := range seqs {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(seqs)-10))
			break
		}
		parts = append(parts, fmt.Sprint(s))
	}
	return "calls " + strings.Join(parts, ", ")
}

// suggestion is candidate c's standing grant, or why none is proposed.
func suggestion(c candidate, set *grant.Set) (string, string) {
	switch c.tool {
	case toolset.Shell:
		if interpreter(c.target) {
			return "", "a shell interpreter or wrapper given code is never proposed"
		}
		return "", "a grant cannot name one shell line; answer such calls `session` instead"
	case toolset.WriteFile:
		return "", "a grant cannot name one file to write; answer such calls `session` instead"
	case toolset.ReadFile, toolset.HTTPFetch:
	default:
		return "", "no standing grant can cover a " + c.tool + " call"
	}
	var ask *grant.Grant
	named := false
	for _, g := range set.Grants() {
		if g.Tool() != c.tool {
			continue
		}
		if covers(g, c) {
			if g.Mode() == grant.Deny {
				return "", "a deny grant covers it (" + g.ID() + ")"
			}
			if g.Standing() {
				return "", "a standing grant covers it already (" + g.ID() + ")"
			}
			named = true
		}
		if g.ID() == c.grant {
			ask = &g
		}
	}
	switch {
	case c.tool == toolset.HTTPFetch && !named:
		return "", "egress to a host no grant names is never proposed"
	case ask == nil || ask.Mode() != grant.Ask || !covers(*ask, c):
		return "", "the grant its approvals rode on (" + c.grant + ") is gone or changed"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[[grant]]\nid = %q\ntool = %q\n", "always-"+strconv.FormatInt(c.id(), 10), c.tool)
	if c.tool == toolset.HTTPFetch {
		fmt.Fprintf(&b, "hosts = [%s]\n", config.Quote(c.target))
	} else {
		fmt.Fprintf(&b, "paths = [%s]\n", config.Quote(c.target))
	}
	fmt.Fprintf(&b, "max_taint = %q\nresult_class = %q\nuntrusted = %t\nmode = \"auto\"\nstanding = true\n",
		ask.MaxTaint().String(), ask.ResultClass().String(), ask.Untrusted())
	return b.String(), ""
}

func covers(g grant.Grant, c candidate) bool {
	if c.tool == toolset.HTTPFetch {
		for _, h := range g.Hosts() {
			if h.String() == c.target {
				return true
			}
		}
		return false
	}
	p, err := toolargs.ParsePath(c.target)
	if err != nil {
		return false
	}
	for _, gp := range g.Paths() {
		if p.Within(gp) && (!g.Standing() || p == gp) {
			return true
		}
	}
	return false
}

// interpreter reports whether a shell line starts with a shell, an
// interpreter or a wrapper that runs what follows it as code.
func interpreter(target string) bool {
	line, _, _ := strings.Cut(target, " in /")
	first := strings.Fields(line)
	if len(first) == 0 {
		return false
	}
	switch filepath.Base(first[0]) {
	case "sh", "bash", "dash", "zsh", "ksh", "fish", "busybox", "env", "time", "nice", "timeout", "nohup", "xargs",
		"sudo", "doas", "stdbuf", "exec", "eval", "python", "python3", "perl", "ruby", "node", "php", "lua", "awk":
		return true
	}
	return false
}

// approvedTargets reads the audit log: every ask decision the owner
// approved (and that re-decided allowed), and every call a session
// allowance decided, grouped by narrowed target, in log order.
func approvedTargets(dir string) ([]candidate, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	asks := map[int64]*audit.Decision{}
	byKey := map[string]*candidate{}
	var order []*candidate
	add := func(d *audit.Decision, seq int64) {
		tool, target, ok := narrowed(d.Record.Tool, d.Record.Arguments)
		if !ok || d.Record.Grant == nil {
			return
		}
		c := &candidate{tool: tool, target: target}
		if old, ok := byKey[c.key()]; ok {
			c = old
		} else {
			byKey[c.key()] = c
			order = append(order, c)
		}
		c.grant = d.Record.Grant.ID
		c.seqs = append(c.seqs, seq)
	}
	for _, e := range entries {
		if !audit.IsLogName(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), audit.MaxLine+1)
		for sc.Scan() {
			r, err := audit.ParseLine(sc.Bytes())
			if err != nil {
				continue // damage: the verifier judges it; it holds no approval
			}
			switch r := r.(type) {
			case *audit.Decision:
				if r.Record.Outcome == audit.Ask {
					asks[r.Seq] = r
				} else if r.Record.Outcome == audit.Allowed && r.Record.Allowance > 0 {
					add(r, r.Seq)
				}
			case *audit.Approval:
				if d, ok := asks[r.Decision]; ok && r.Answer == audit.AnswerApproved && r.Outcome == audit.Allowed {
					add(d, r.Decision)
				}
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil && !errors.Is(err, bufio.ErrTooLong) {
			return nil, err
		}
	}
	out := make([]candidate, len(order))
	for i, c := range order {
		out[i] = *c
	}
	return out, nil
}

// narrowed is a call's tool and narrowed target, as a session allowance
// or a standing grant would name it.
func narrowed(tool string, raw json.RawMessage) (string, string, bool) {
	switch tool {
	case toolset.ReadFile, toolset.WriteFile, toolset.HTTPFetch, toolset.Shell:
	default:
		return "", "", false
	}
	if tool == toolset.WriteFile {
		// recorded without its content (brokerd's audit form)
		var w struct {
			Path string `json:"path"`
		}
		if json.Unmarshal(raw, &w) != nil || w.Path == "" {
			return "", "", false
		}
		return tool, w.Path, true
	}
	a, err := toolargs.Parse(tool, raw)
	if err != nil {
		return "", "", false
	}
	switch a := a.(type) {
	case toolargs.ReadFile:
		return tool, a.Path.String(), true
	case toolargs.HTTPFetch:
		return tool, a.URL.Host().String(), true
	case toolargs.Shell:
		return tool, a.Command + " in " + a.Workdir.String(), true
	}
	return "", "", false
}
