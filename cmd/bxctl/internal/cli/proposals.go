package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

// Grant proposals (issue 26): brokerd writes them to proposals/ from an
// owner's `!approve ID CODE always`; only the owner, as the owner, puts
// one into grants/, after reading it, and only if brokerd's own loader
// accepts the directory with it, owners and modes included. brokerd never
// writes grants/.

// proposalFlags are the flags of the proposal subcommands.
type proposalFlags struct {
	state, grants string
	owner         uint32
}

func parseProposalFlags(name string, args []string, stderr io.Writer) (proposalFlags, []string, bool) {
	fs := flags(name, stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	grantsFlag := fs.String("grants", "", "grant `directory` (default STATE/grants)")
	owner := fs.Int("owner-uid", os.Getuid(), "the owner's uid, as brokerd.toml's owner_uid")
	if err := fs.Parse(args); err != nil || *owner < 0 || int64(*owner) > math.MaxUint32 {
		return proposalFlags{}, nil, false
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %s: %v\n", name, err)
		return proposalFlags{}, nil, false
	}
	g := *grantsFlag
	if g == "" {
		g = layout.Grants.In(state)
	}
	return proposalFlags{state: state, grants: g, owner: uint32(*owner)}, fs.Args(), true
}

// runProposals is `bxctl grants proposals`: every proposal, in full.
func runProposals(args []string, stdout, stderr io.Writer) int {
	pf, rest, ok := parseProposalFlags("grants proposals", args, stderr)
	if !ok || len(rest) != 0 {
		fmt.Fprintln(stderr, "usage: bxctl grants proposals [--state DIR]")
		return ExitUsage
	}
	ids, err := proposalIDs(pf.state)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl grants proposals: %v\n", err)
		return ExitFailed
	}
	if len(ids) == 0 {
		fmt.Fprintln(stdout, "no grant proposals")
		return ExitOK
	}
	for _, id := range ids {
		b, err := os.ReadFile(proposalPath(pf.state, id))
		if err != nil {
			fmt.Fprintf(stderr, "bxctl grants proposals: %v\n", err)
			return ExitFailed
		}
		fmt.Fprintf(stdout, "proposal %d (bxctl grants apply %d, or bxctl grants drop %d):\n%s\n", id, id, id, escapeLines(string(b)))
	}
	return ExitOK
}

func proposalPath(state string, id int64) string {
	return filepath.Join(layout.Proposals.In(state), strconv.FormatInt(id, 10)+".toml")
}

func proposalIDs(state string) ([]int64, error) {
	entries, err := os.ReadDir(layout.Proposals.In(state))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), ".toml")
		if id, err := strconv.ParseInt(n, 10, 64); ok && err == nil && id > 0 && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// escapeLines escapes each line of text for the terminal.
func escapeLines(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = escape.Line(l)
	}
	return strings.Join(lines, "\n")
}

// runApply is `bxctl grants apply N`: it shows proposal N and the change
// to grants/, checks the directory with it by brokerd's own loader
// (owners and modes included) in a copy, writes it into grants/ as the
// owner (mode 0640), checks grants/ again, and asks brokerd to drop the
// proposal.
func runApply(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	pf, rest, ok := parseProposalFlags("grants apply", args, stderr)
	id, err := int64(0), error(nil)
	if ok && len(rest) == 1 {
		id, err = strconv.ParseInt(rest[0], 10, 64)
	}
	if !ok || len(rest) != 1 || err != nil || id < 1 {
		fmt.Fprintln(stderr, "usage: bxctl grants apply [--state DIR] [--grants DIR] [--owner-uid N] ID (from bxctl grants proposals)")
		return ExitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "bxctl grants apply: "+format+"; see docs/runbook.md#proposal-refused\n", a...)
		return ExitFailed
	}
	text, err := os.ReadFile(proposalPath(pf.state, id))
	if err != nil {
		return fail("proposal %d: %v", id, err)
	}
	gs, ps := grant.ParseFile(fmt.Sprintf("proposal %d", id), text)
	want := "always-" + strconv.FormatInt(id, 10)
	switch {
	case len(ps) > 0:
		return fail("proposal %d does not parse: %s", id, ps[0])
	case len(gs) != 1 || gs[0].ID() != want || !gs[0].Standing():
		// Only what brokerd writes: one standing grant named after its
		// approval. Anything else in proposals/ is not a proposal.
		return fail("proposal %d is not one standing grant with id %q, as brokerd writes them; nothing applied", id, want)
	}
	name := want + ".toml"
	target := filepath.Join(pf.grants, name)
	if _, err := os.Lstat(target); err == nil {
		return fail("%s already exists: proposal %d was applied before (drop it: bxctl grants drop %d)", target, id, id)
	}
	owners := ownership.Trust(pf.owner)
	if _, err := grant.LoadDir(pf.grants, owners); err != nil {
		return fail("grants/ is invalid as it is, so nothing is added to it: %v (bxctl grants check %s)", err, pf.grants)
	}
	fmt.Fprintf(stdout, "proposal %d:\n%s\n\nchange to %s: a new file %s\n", id, escapeLines(string(text)), pf.grants, name)
	for _, l := range strings.Split(strings.TrimRight(string(text), "\n"), "\n") {
		fmt.Fprintln(stdout, "+ "+escape.Line(l))
	}
	if err := checkWith(pf.grants, name, text, owners); err != nil {
		return fail("brokerd's loader refuses grants/ with proposal %d: %v; nothing applied", id, err)
	}
	if err := writeGrant(pf.grants, name, text); err != nil {
		return fail("writing %s: %v", target, err)
	}
	if _, err := grant.LoadDir(pf.grants, owners); err != nil {
		os.Remove(target)
		return fail("grants/ with %s is refused by the loader (%v); it was removed again", name, err)
	}
	fmt.Fprintf(stdout, "applied: %s (owned by uid %d, mode 0640); brokerd reads it at the next call\n", target, os.Getuid())
	if a, err := ask[*wire.Answered](ctx, pf.state, &wire.Admin, &wire.DropProposal{ID: id}); err != nil {
		fmt.Fprintf(stderr, "bxctl grants apply: the proposal stays in proposals/ (%v); drop it later with bxctl grants drop %d\n", err, id)
	} else {
		fmt.Fprintln(stdout, escape.Line(a.Msg))
	}
	return ExitOK
}

// checkWith loads a copy of grants dir with file name holding text added.
func checkWith(dir, name string, text []byte, owners ownership.Owners) error {
	tmp, err := os.MkdirTemp("", "bxctl-apply-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o750); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o640); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, name), text, 0o640); err != nil {
		return err
	}
	_, err = grant.LoadDir(tmp, owners)
	return err
}

// writeGrant writes dir/name whole, as writeOwnerFile does.
func writeGrant(dir, name string, text []byte) error {
	return writeOwnerFile(dir, name, text, "bxctl grants apply")
}

// writeOwnerFile writes dir/name whole for brokerd to read: a temporary
// file beside dir (never a stray file in it, which would make brokerd
// refuse the directory meanwhile), mode 0640 and the directory's group
// (brokerd's, in the layout: its files are read through it; giving it
// needs membership or root, else cmd says so), fsynced, renamed into
// place.
func writeOwnerFile(dir, name string, text []byte, cmd string) error {
	f, err := os.CreateTemp(filepath.Dir(dir), ".bxctl-write-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(text)
	if err == nil {
		err = f.Chmod(0o640)
	}
	if fi, serr := os.Stat(dir); err == nil && serr == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if cerr := f.Chown(-1, int(st.Gid)); cerr != nil {
				fmt.Fprintf(os.Stderr, "%s: note: %s keeps your group (%v); give it group %d (chgrp) or brokerd cannot read it\n", cmd, name, cerr, st.Gid)
			}
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// runDrop is `bxctl grants drop N`: brokerd deletes the proposal (the
// directory is its own).
func runDrop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	pf, rest, ok := parseProposalFlags("grants drop", args, stderr)
	id, err := int64(0), error(nil)
	if ok && len(rest) == 1 {
		id, err = strconv.ParseInt(rest[0], 10, 64)
	}
	if !ok || len(rest) != 1 || err != nil || id < 1 {
		fmt.Fprintln(stderr, "usage: bxctl grants drop [--state DIR] ID")
		return ExitUsage
	}
	a, err := ask[*wire.Answered](ctx, pf.state, &wire.Admin, &wire.DropProposal{ID: id})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl grants drop: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintln(stdout, escape.Line(a.Msg))
	return ExitOK
}
