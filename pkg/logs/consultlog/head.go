package consultlog

import (
	"fmt"
	"path/filepath"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
)

// The head record, package audit's (see "Where the log ends" there): a
// chain cannot see its own end cut off, a well-chained line added or
// every line re-chained after an edit, and a consult that failed before
// its container ran has no audit result to show its lines were there. So
// the writer records the head it wrote beside the log's directory
// (audit.HeadPath: STATE/broker/consult.head), twice per append, with
// package audit's code ([audit.WriteHead]); [Open] and [VerifyEnd] judge
// the log's end against it with package audit's judgment
// ([audit.CheckHead]), and the owner's anchors of this log with
// [audit.CheckAnchors]. Only the words and the runbook entries differ.

// Head names the consult log for the head judgment.
var Head = &audit.HeadLog{Name: "the consult log", Whole: "the whole file", See: map[audit.HeadKind]string{
	0:                   "see docs/runbook.md#consult-log-damaged",
	audit.HeadMissing:   "see docs/runbook.md#consult-head-missing",
	audit.HeadTruncated: "see docs/runbook.md#consult-truncated",
	audit.HeadDiffers:   "see docs/runbook.md#consult-head-differs",
}}

// keepHead is the seq a head judgment needs the hash of.
func keepHead(h *audit.Head) map[int64]bool {
	if h == nil {
		return nil
	}
	return map[int64]bool{h.Seq: true}
}

// end is the scanned log's end, for the head judgment.
func (st *state) end() audit.LogEnd {
	return audit.LogEnd{Pos: st.seq, Last: st.prev, At: st.hashAt}
}

func (st *state) hashAt(seq int64) (string, bool) {
	h, ok := st.kept[seq]
	return h, ok
}

// End is what [VerifyEnd] found: the chain and its links, and how the
// log's end compares with brokerd's head record and the owner's anchors.
type End struct {
	Report
	// HeadProblem is the failed comparison with the head record (a
	// missing record for a log with lines included); nil when the log
	// ends where brokerd left it.
	HeadProblem    error
	HeadSeq        int64                // the head record's seq, when there is one
	HeadPresent    bool                 // a head record exists (readable or not)
	AnchorProblems []*audit.AnchorError // every anchor the log fails, in anchor order
	Anchors        int                  // anchors checked
}

// OK reports whether the log verifies, ends at brokerd's head and meets
// every anchor.
func (e End) OK() bool { return e.Report.OK() && e.HeadProblem == nil && len(e.AnchorProblems) == 0 }

// VerifyEnd is [Verify] plus the checks the chain cannot make of itself:
// the log's end against brokerd's head record and against each anchor
// the caller passes for this log (anchors name the log's directory, as
// the audit log's name theirs). A missing file with a head record is a
// log cut to nothing. It only reads.
func VerifyEnd(dir, auditDir string, anchors []audit.Anchor) End {
	headPath := audit.HeadPath(dir)
	head, herr := audit.ReadHead(headPath)
	keep := keepHead(head)
	for _, a := range anchors {
		if keep == nil {
			keep = map[int64]bool{}
		}
		keep[a.Seq] = true
	}
	st, rep := verify(dir, auditDir, keep)
	e := End{Report: rep, Anchors: len(anchors), HeadPresent: head != nil || herr != nil}
	if st == nil {
		return e
	}
	if p := audit.CheckHead(Head, headPath, head, herr, st.end()); p != nil {
		e.HeadProblem = p
	}
	if head != nil {
		e.HeadSeq = head.Seq
	}
	e.AnchorProblems = audit.CheckAnchors(anchors, st.seq, st.hashAt)
	return e
}

// Anchor is the owner's anchor of this log's verified end, for the log
// directory named log (absolute, links resolved); ok is false for an
// empty log, which has nothing to anchor.
func (e End) Anchor(log string, now time.Time) (a audit.Anchor, ok bool) {
	if e.Lines == 0 {
		return audit.Anchor{}, false
	}
	return audit.Anchor{Log: log, Seq: int64(e.Lines), Hash: e.Head, Time: now.UTC().Format(audit.TimeLayout)}, true
}

// AdoptHead is brokerd --adopt-consult-head: the owner's decision that the
// log in dir as it is now is the log. It refuses a log whose chain does
// not hold (there is no end to adopt: docs/runbook.md#consult-log-damaged),
// moves the old head record aside ([audit.ReplaceHead]) and records the
// log's end. brokerd must not be running (the caller holds its lock).
func AdoptHead(dir string, now time.Time) (*audit.Head, audit.Head, error) {
	st, err := scan(filepath.Join(dir, FileName), nil)
	if err != nil {
		return nil, audit.Head{}, fmt.Errorf("adopt consult head: %v (%w)", err, ErrDamaged)
	}
	if st.problem != nil {
		return nil, audit.Head{}, fmt.Errorf("adopt consult head: %s: %w", st.problem, ErrDamaged)
	}
	h := audit.Head{Seq: st.seq, Hash: st.prev}
	old, err := audit.ReplaceHead(audit.HeadPath(dir), h, now)
	if err != nil {
		return nil, audit.Head{}, fmt.Errorf("adopt consult head: %v", err)
	}
	return old, h, nil
}
