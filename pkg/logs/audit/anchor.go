package audit

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// Anchor is a head of the log recorded by the owner outside brokerd
// (`bxctl audit anchor`), in a file brokerd cannot write: whatever
// happens to the log and to brokerd's own head record, the log must
// still reach Seq, and its line Seq must still hash to Hash.
type Anchor struct {
	Log  string `json:"log"`  // the audit directory, absolute, links resolved
	Seq  int64  `json:"seq"`  // a line of the log, from 1
	Hash string `json:"hash"` // its hash
	Time string `json:"time"` // when it was anchored, in TimeLayout
}

// ParseAnchor decodes one line of an anchors file strictly.
func ParseAnchor(line []byte) (Anchor, error) {
	var a Anchor
	if err := strict.Unmarshal(line, &a); err != nil {
		return Anchor{}, err
	}
	switch {
	case !filepath.IsAbs(a.Log) || filepath.Clean(a.Log) != a.Log:
		return Anchor{}, fmt.Errorf("log %q is not a clean absolute path", a.Log)
	case a.Seq < 1:
		return Anchor{}, fmt.Errorf("seq %d: want 1 or more", a.Seq)
	case !IsHash(a.Hash):
		return Anchor{}, fmt.Errorf("hash %q is not a lowercase hex SHA-256", a.Hash)
	}
	if err := checkTime(a.Time); err != nil {
		return Anchor{}, err
	}
	if again, err := a.Line(); err != nil || !bytes.Equal(again, line) {
		return Anchor{}, errors.New("not in canonical form")
	}
	return a, nil
}

// Line is the anchor's canonical line, without its newline.
func (a Anchor) Line() ([]byte, error) { return strict.Marshal(a) }

// ParseAnchors decodes an anchors file: one anchor a line. Every line
// must parse: an anchor the owner wrote and the verifier skipped would be
// a check silently not made.
func ParseAnchors(data []byte) ([]Anchor, error) {
	var out []Anchor
	if len(data) == 0 {
		return nil, nil
	}
	body, ok := bytes.CutSuffix(data, []byte("\n"))
	if !ok {
		return nil, errors.New("parse anchors: the last line has no newline (a write was cut short)")
	}
	for i, line := range bytes.Split(body, []byte("\n")) {
		a, err := ParseAnchor(line)
		if err != nil {
			return nil, fmt.Errorf("parse anchors: line %d: %v", i+1, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// NewAnchor is the anchor of a verified log's end: its report's last seq
// and head, for the audit directory log (absolute, links resolved).
func NewAnchor(log string, r Report, now time.Time) Anchor {
	return Anchor{Log: log, Seq: r.LastSeq, Hash: r.Head, Time: now.UTC().Format(TimeLayout)}
}

// AnchorError is a log that fails one of the owner's anchors.
type AnchorError struct {
	Anchor  Anchor
	PastEnd bool // the log ends before the anchor; otherwise its line there differs
	Got     string
}

func (e *AnchorError) Error() string {
	a := e.Anchor
	if e.PastEnd {
		return fmt.Sprintf("anchor of %s (seq %d, hash %s) is past the log's end at seq %s: records the owner saw were removed; see docs/runbook.md#audit-anchor-past-end", a.Time, a.Seq, a.Hash, e.Got)
	}
	return fmt.Sprintf("anchor of %s: the line at seq %d hashes to %s, but the owner anchored %s: the log was rewritten from that line or before it; see docs/runbook.md#audit-anchor-differs", a.Time, a.Seq, e.Got, a.Hash)
}

// CheckAnchors is every anchor a log that ends at seq pos fails, in
// anchor order; hashAt is the hash of each anchored line the verifier
// kept. Package consultlog's verifier checks its anchors with it too.
func CheckAnchors(anchors []Anchor, pos int64, hashAt func(seq int64) (string, bool)) []*AnchorError {
	var out []*AnchorError
	for _, a := range anchors {
		switch got, ok := hashAt(a.Seq); {
		case a.Seq > pos:
			out = append(out, &AnchorError{Anchor: a, PastEnd: true, Got: fmt.Sprint(pos)})
		case !ok || got != a.Hash:
			out = append(out, &AnchorError{Anchor: a, Got: got})
		}
	}
	return out
}

// End is what [VerifyEnd] found: the chain, and how its end compares with
// brokerd's head record and the owner's anchors.
type End struct {
	Report
	// HeadProblem is the failed comparison with brokerd's head record
	// (a missing record for a log with lines included); nil when the log
	// ends where brokerd left it.
	HeadProblem error
	HeadSeq     int64 // the head record's seq, when there is one
	// AnchorProblems lists every anchor the log fails, in anchor order.
	AnchorProblems []*AnchorError
	Anchors        int // anchors checked
}

// OK reports whether the chain holds, ends at brokerd's head and meets
// every anchor.
func (e End) OK() bool {
	return e.Report.OK() && e.HeadProblem == nil && len(e.AnchorProblems) == 0
}

// VerifyEnd is [Verify] plus the checks a chain cannot make of itself:
// the log's end against brokerd's head record ([HeadPath]) and against
// each anchor (the caller passes those for this log). It only reads.
func VerifyEnd(dir string, anchors []Anchor) End {
	files, err := listLogs(dir)
	if err != nil {
		return End{Report: Report{Head: Genesis, Problem: &Problem{Reason: err.Error(), Unreadable: true}}}
	}
	v := newVerifier()
	v.files = len(files)
	headPath := HeadPath(dir)
	head, herr := ReadHead(headPath)
	if head != nil {
		v.keep(head.Seq)
	}
	for _, a := range anchors {
		v.keep(a.Seq)
	}
	v.run(&source{dir: dir, files: files})
	e := End{Report: v.report(), Anchors: len(anchors)}
	if e.Report.Problem != nil && e.Report.Problem.Unreadable {
		return e
	}
	if p := CheckHead(AuditHead, headPath, head, herr, v.ends()); p != nil {
		e.HeadProblem = p
	}
	if head != nil {
		e.HeadSeq = head.Seq
	}
	e.AnchorProblems = CheckAnchors(anchors, v.pos, v.hashAt)
	return e
}
