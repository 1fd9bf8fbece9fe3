package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// The owner's anchors live in the owner's own state, not brokerd's: a file
// under STATE is one brokerd (which owns STATE) could rewrite or replace,
// while the owner's home is out of reach of a brokerd with a uid of its
// own. When the owner and brokerd share a uid (bxctl up), nothing the
// owner writes is out of brokerd's reach: copy anchors elsewhere too (each
// is printed). One file holds the anchors of every log, each naming its
// audit directory, so that a second state directory does not mix its
// anchors into the first's.

// anchorsName is the anchors file under $XDG_STATE_HOME/boxmaker.
const anchorsName = "audit-anchors.jsonl"

// maxAnchors caps the anchors file (about 100,000 anchors).
const maxAnchors = 16 << 20

// defaultAnchors is $XDG_STATE_HOME/boxmaker/audit-anchors.jsonl, with
// XDG_STATE_HOME defaulting to ~/.local/state as the XDG spec says.
func defaultAnchors() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no home directory for the anchors file (%v): give --anchors FILE", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "boxmaker", anchorsName), nil
}

// logKey is how an anchor names its log: the audit directory, absolute,
// links resolved, so one log reached by two paths has one set of anchors.
func logKey(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	return abs, nil // a missing directory: the verifier says so
}

// readAnchors returns the anchors of the log in dir from the anchors file
// at path (none when it does not exist). The file must be the owner's: one
// anyone else can write could have lost anchors.
func readAnchors(path, log string) ([]audit.Anchor, error) {
	b, err := ownership.Self().ReadFile(path, maxAnchors)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	all, err := audit.ParseAnchors(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v; see docs/runbook.md#audit-anchors-invalid", path, err)
	}
	var mine []audit.Anchor
	for _, a := range all {
		if a.Log == log {
			mine = append(mine, a)
		}
	}
	return mine, nil
}

// appendAnchor adds one line to the anchors file, durably, creating it
// (0600, in a 0700 directory) if needed, and only if it is the owner's.
func appendAnchor(path string, a audit.Anchor) error {
	line, err := a.Line()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if _, err := ownership.Self().Check(filepath.Dir(path)); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := ownership.Self().Check(path); err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// runAuditAnchor is `bxctl audit anchor [--anchors FILE] DIR`: it checks
// the whole log as `audit verify` does (chain, brokerd's head record,
// earlier anchors), and the consult log beside it the same way, and only
// if all hold records each log's end as an anchor in the owner's anchors
// file (the consult log's keyed by its own directory, in the same format)
// and prints them.
func runAuditAnchor(args []string, stdout, stderr io.Writer) int {
	const use = "usage: bxctl audit anchor [--anchors FILE] DIR"
	fs := flags("audit anchor", stderr)
	anchors := fs.String("anchors", "", "the owner's anchors file (default $XDG_STATE_HOME/boxmaker/"+anchorsName+")")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), use)
		fmt.Fprintln(fs.Output(), "Records the verified end of the audit log in DIR, and of the consult log beside it, in your anchors file, which audit verify then checks.")
	}
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "bxctl audit anchor: takes exactly one argument, the audit directory")
		fs.Usage()
		return ExitUsage
	}
	dir := fs.Arg(0)
	path, log, mine, code := anchorsFor(*anchors, dir, stderr, "audit anchor")
	if code != ExitOK {
		return code
	}
	e := audit.VerifyEnd(dir, mine)
	if !e.OK() {
		printEnd(stdout, dir, e)
		fmt.Fprintln(stderr, "bxctl audit anchor: the log fails its checks, so its end is not anchored")
		return ExitFailed
	}
	if e.LastSeq == 0 {
		fmt.Fprintf(stderr, "bxctl audit anchor: the log in %s is empty: nothing to anchor\n", dir)
		return ExitFailed
	}
	cdir, ckey, ce, cpresent, code := consultEnd(*anchors, dir, stderr, "audit anchor")
	if code != ExitOK {
		return code
	}
	if cpresent && !ce.OK() {
		printConsultEnd(stdout, cdir, ce)
		fmt.Fprintln(stderr, "bxctl audit anchor: the consult log fails its checks, so neither log's end is anchored")
		return ExitFailed
	}
	now := time.Now()
	todo := []audit.Anchor{audit.NewAnchor(log, e.Report, now)}
	if a, ok := ce.Anchor(ckey, now); cpresent && ok {
		todo = append(todo, a) // the consult log's own line in the same file, keyed by its directory
	}
	for _, a := range todo {
		if err := appendAnchor(path, a); err != nil {
			fmt.Fprintf(stderr, "bxctl audit anchor: write %s: %v\n", path, err)
			return ExitFailed
		}
		line, _ := a.Line()
		fmt.Fprintf(stdout, "anchored seq %d, hash %s of %s in %s\n%s\n", a.Seq, a.Hash, escape.Line(a.Log), path, line)
	}
	anchorTime(dir, now, stdout, stderr)
	return ExitOK
}

// anchorTime writes the anchor's time into the metrics/ directory of
// the state whose audit log dir is, when it is one (STATE/broker/audit
// with a STATE/metrics/): the one figure of the owner's anchors that
// !status and a dashboard show. A failure is a warning: the anchor
// itself is recorded.
func anchorTime(dir string, now time.Time, stdout, stderr io.Writer) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	state := strings.TrimSuffix(abs, string(filepath.Separator)+filepath.FromSlash(layout.Audit.Path))
	if state == abs {
		return
	}
	if fi, err := os.Stat(layout.Metrics.In(state)); err != nil || !fi.IsDir() {
		return
	}
	p := layout.AnchorTimeFile(state)
	if err := audit.WriteAnchorTime(p, now); err != nil {
		fmt.Fprintf(stderr, "bxctl audit anchor: the anchor is recorded, but its time was not written to %s (!status and the metrics will show an older anchor): %v; see docs/runbook.md#metrics-not-written\n", p, err)
		return
	}
	fmt.Fprintf(stdout, "its time is in %s (for !status and node_exporter)\n", p)
}

// anchorsFor resolves the anchors file and the log's key, and reads the
// log's anchors.
func anchorsFor(flagPath, dir string, stderr io.Writer, cmd string) (path, log string, mine []audit.Anchor, code int) {
	path = flagPath
	if path == "" {
		var err error
		if path, err = defaultAnchors(); err != nil {
			fmt.Fprintf(stderr, "bxctl %s: %v\n", cmd, err)
			return "", "", nil, ExitFailed
		}
	}
	log, err := logKey(dir)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %s: %v; see docs/runbook.md#audit-unreadable\n", cmd, err)
		return "", "", nil, ExitFailed
	}
	mine, err = readAnchors(path, log)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %s: anchors: %s\n", cmd, escape.Line(err.Error()))
		return "", "", nil, ExitFailed
	}
	return path, log, mine, ExitOK
}

// printEnd prints every problem VerifyEnd found, one a line, or the
// summary with what the head record and anchors showed.
func printEnd(stdout io.Writer, dir string, e audit.End) {
	if p := e.Problem; p != nil {
		shown := *p
		if shown.File != "" {
			shown.File = filepath.Join(dir, shown.File)
		}
		fmt.Fprintln(stdout, escape.Line(shown.Error()))
	}
	if e.HeadProblem != nil {
		fmt.Fprintln(stdout, escape.Line(e.HeadProblem.Error()))
	}
	for _, ap := range e.AnchorProblems {
		fmt.Fprintln(stdout, escape.Line(ap.Error()))
	}
	if !e.OK() {
		return
	}
	s := e.Summary()
	if e.LastSeq > 0 {
		s += fmt.Sprintf("; ends at brokerd's head record (seq %d)", e.HeadSeq)
	}
	switch {
	case e.Anchors == 0:
		s += "; no anchors (bxctl audit anchor records one)"
	default:
		s += fmt.Sprintf("; %d anchors hold", e.Anchors)
	}
	fmt.Fprintln(stdout, escape.Line(s))
}
