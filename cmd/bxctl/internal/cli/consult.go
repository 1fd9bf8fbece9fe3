package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// consult is named by toolset's constant: tool names are spelled once.
func init() {
	commands[toolset.Consult] = command{"print the outbound consult log: every payload sent to a remote model, and its answer", runConsult}
	subcommands[toolset.Consult] = []string{"log"}
}

// runConsult is `bxctl consult log STATE`: every record of the outbound
// consult log in STATE (brokerd's state directory), in order, after
// checking its chain; each payload is printed whole, every byte the
// remote model received, and each answer with its reasoning. Text from
// the log (the model's question, the remote model's answer) is escaped,
// as everything bxctl prints. A log that does not verify is printed up
// to its first bad line, which is named, and the exit is 1; one that does
// not end at brokerd's head record (broker/consult.head: lines cut off,
// the file deleted, lines added) is printed whole, the head's problem
// named after it, and the exit is 1.
func runConsult(_ context.Context, args []string, stdout, stderr io.Writer) int {
	set := flags("consult log", stderr)
	set.Usage = func() {
		fmt.Fprintln(set.Output(), "usage: bxctl consult log STATE")
		fmt.Fprintln(set.Output(), "Prints brokerd's outbound consult log (STATE/"+layout.ConsultLog.Path+"/"+consultlog.FileName+"): every payload sent to a remote model, in full, and its answer.")
	}
	if len(args) == 0 || args[0] != "log" {
		set.Usage()
		return ExitUsage
	}
	if err := set.Parse(args[1:]); err != nil {
		return ExitUsage
	}
	if set.NArg() != 1 {
		set.Usage()
		return ExitUsage
	}
	state := set.Arg(0)
	dir := layout.ConsultLog.In(state)
	path := filepath.Join(dir, consultlog.FileName)
	e := consultlog.VerifyEnd(dir, layout.Audit.In(state), nil)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && e.OK() {
		fmt.Fprintln(stdout, "no consult has been sent: "+escape.Line(path)+" does not exist")
		return ExitOK
	}
	rep := e.Report
	var err error
	if _, serr := os.Stat(path); serr == nil {
		err = jsonl.Scan(path, consultlog.MaxLine+1, func(line int, b []byte) error {
			if rep.Problem != nil && rep.Problem.Line > 0 && line >= rep.Problem.Line {
				return errStopPrint
			}
			r, err := consultlog.ParseLine(b)
			if err != nil {
				return err
			}
			printConsult(stdout, r)
			return nil
		})
	}
	if err != nil && !errors.Is(err, errStopPrint) && rep.Problem == nil {
		fmt.Fprintln(stdout, escape.Line("consult log: "+err.Error()))
		return ExitFailed
	}
	if rep.Problem != nil {
		p := *rep.Problem
		p.File = filepath.Join(dir, p.File)
		fmt.Fprintln(stdout, escape.Line("consult log does not verify: "+p.Error()))
		return ExitFailed
	}
	if e.HeadProblem != nil {
		// Printed after the records: what is missing is past them.
		fmt.Fprintln(stdout, escape.Line("consult log does not verify: "+e.HeadProblem.Error()))
		return ExitFailed
	}
	fmt.Fprintf(stdout, "consult log intact: %d requests, %d responses; ends at brokerd's head record (seq %d)\n", rep.Requests, rep.Responses, e.HeadSeq)
	return ExitOK
}

var errStopPrint = errors.New("stop")

func printConsult(w io.Writer, r consultlog.Record) {
	switch r := r.(type) {
	case *consultlog.Request:
		fmt.Fprintf(w, "#%d %s request: session %s, audit decision %d (sha256 %s), grant %s, model %s\n",
			r.Seq, r.Time, escape.Line(r.Session), r.Decision, r.DecisionSHA256, escape.Line(r.Grant.ID), escape.Line(r.Model))
		fmt.Fprintf(w, "POST %s\n%s\n\n", escape.Line(r.URL), escape.Text(r.Body))
	case *consultlog.Response:
		fmt.Fprintf(w, "#%d %s response to #%d: status %d, finish %q, %d bytes streamed (sha256 %s), truncated %v\n",
			r.Seq, r.Time, r.Request, r.Status, escape.Line(r.Finish), r.StreamBytes, r.StreamSHA256, r.Truncated)
		if r.Error != "" {
			fmt.Fprintf(w, "error: %s\n", escape.Line(r.Error))
		}
		fmt.Fprintf(w, "reasoning:\n%s\nanswer:\n%s\n\n", escape.Text(r.Reasoning), escape.Text(r.Content))
	}
}

// consultDir is the consult log's directory beside the audit directory
// auditDir (STATE/broker/consult beside STATE/broker/audit).
func consultDir(auditDir string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(auditDir)), filepath.Base(layout.ConsultLog.Path))
}

// consultEnd verifies the consult log beside auditDir: its chain, its
// links to the audit log, its end against brokerd's head record
// (consult.head) and the owner's anchors of it (anchors names the file,
// "" for the default). present is false when there is nothing to check:
// no log, no head record and no anchor of it (no consult was ever sent
// by a brokerd that keeps one).
func consultEnd(anchors, auditDir string, stderr io.Writer, cmd string) (dir, key string, e consultlog.End, present bool, code int) {
	dir = consultDir(auditDir)
	_, key, mine, code := anchorsFor(anchors, dir, stderr, cmd)
	if code != ExitOK {
		return "", "", consultlog.End{}, false, code
	}
	e = consultlog.VerifyEnd(dir, auditDir, mine)
	_, err := os.Stat(filepath.Join(dir, consultlog.FileName))
	present = err == nil || e.HeadPresent || len(mine) > 0
	return dir, key, e, present, ExitOK
}

// printConsultEnd prints every problem of the consult log, one a line
// (the first bad line as DIR/consult.jsonl:N, a head that differs, each
// anchor it fails), or its summary.
func printConsultEnd(stdout io.Writer, dir string, e consultlog.End) {
	if p := e.Problem; p != nil {
		shown := *p
		shown.File = filepath.Join(dir, shown.File)
		fmt.Fprintln(stdout, escape.Line("consult log: "+shown.Error()))
	}
	if e.HeadProblem != nil {
		fmt.Fprintln(stdout, escape.Line("consult log: "+e.HeadProblem.Error()))
	}
	for _, ap := range e.AnchorProblems {
		fmt.Fprintln(stdout, escape.Line("consult log: "+ap.Error()))
	}
	if !e.OK() {
		return
	}
	s := fmt.Sprintf("consult log intact: %d requests, %d responses, each linked to its audit decision; ends at brokerd's head record (seq %d)", e.Requests, e.Responses, e.HeadSeq)
	if e.Anchors > 0 {
		s += fmt.Sprintf("; %d anchors hold", e.Anchors)
	}
	fmt.Fprintln(stdout, s)
}

// verifyConsultLog checks the consult log beside auditDir, if there is
// one, and prints what it found.
func verifyConsultLog(stdout, stderr io.Writer, auditDir, anchors string) bool {
	dir, _, e, present, code := consultEnd(anchors, auditDir, stderr, "audit verify")
	if code != ExitOK {
		return false
	}
	if !present {
		return true // no consult was ever sent
	}
	printConsultEnd(stdout, dir, e)
	return e.OK()
}
