package consultlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Problem is the first line that does not verify.
type Problem struct {
	File string
	Line int // 1-based; 0 for a problem of the file or of the audit link
	Msg  string
}

func (p *Problem) Error() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
}

// Report is what [Verify] found.
type Report struct {
	Lines, Requests, Responses int
	Head                       string   // the hash of the last line read; audit.Genesis for none
	Problem                    *Problem // nil: the log verifies
}

// OK reports whether the log verified.
func (r Report) OK() bool { return r.Problem == nil }

// state is a scan's result.
type state struct {
	seq      int64
	prev     string
	requests map[int64]string // seq -> line hash
	links    map[int64]link   // request seq -> its audit link
	answered map[int64]bool   // request seqs that have a response
	kept     map[int64]string // line hashes at the seqs asked for (the head's, the anchors')
	lines    int
	nreq     int
	nresp    int
	problem  *Problem
}

type link struct {
	line     int
	decision int64
	sha      string
}

// scan reads and checks the log's own chain, keeping the hashes of the
// lines at the seqs in keep; a missing file is empty.
func scan(path string, keep map[int64]bool) (*state, error) {
	st := &state{prev: audit.Genesis, requests: map[int64]string{}, links: map[int64]link{}, answered: map[int64]bool{}, kept: map[int64]string{}}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	name := filepath.Base(path)
	bad := func(n int, format string, args ...any) error {
		st.problem = &Problem{File: name, Line: n, Msg: fmt.Sprintf(format, args...)}
		return errStop
	}
	err := jsonl.Scan(path, MaxLine+1, func(n int, b []byte) error {
		st.lines = n
		r, err := ParseLine(b)
		if err != nil {
			return bad(n, "%v", err)
		}
		h := r.head()
		if h.Seq != int64(n) {
			return bad(n, "seq %d, want %d", h.Seq, n)
		}
		if h.Prev != st.prev {
			// The line named is the one whose bytes no longer hash to
			// what the next line recorded: it was changed (or lines
			// after it were removed or inserted).
			return bad(n-1, "line %d hashes to %s, but line %d records %s as its prev: line %d was changed, or a line after it removed or inserted", n-1, st.prev, n, h.Prev, n-1)
		}
		switch r := r.(type) {
		case *Request:
			st.nreq++
			st.links[r.Seq] = link{n, r.Decision, r.DecisionSHA256}
		case *Response:
			st.nresp++
			want, ok := st.requests[r.Request]
			if !ok || want != r.RequestSHA256 {
				return bad(n, "response names request %d with hash %s, which is not a request line of this log", r.Request, r.RequestSHA256)
			}
			st.answered[r.Request] = true
		}
		st.seq, st.prev = h.Seq, audit.LineHash(b)
		if keep[h.Seq] {
			st.kept[h.Seq] = st.prev
		}
		if _, ok := r.(*Request); ok {
			st.requests[h.Seq] = st.prev
		}
		return nil
	})
	var torn *jsonl.TornError
	switch {
	case errors.Is(err, errStop):
		return st, nil
	case errors.As(err, &torn):
		st.problem = &Problem{File: name, Line: st.lines + 1, Msg: "the last line is torn (no newline)"}
		return st, nil
	case err != nil:
		st.problem = &Problem{File: name, Line: st.lines + 1, Msg: err.Error()}
		return st, nil
	}
	return st, nil
}

var errStop = errors.New("stop")

// Verify checks the log in dir: its own chain and, with auditDir set,
// that every request's decision_sha256 is the hash of that audit line,
// that the line allowed a consult, and that every consult the audit log
// recorded a result for has its request here.
func Verify(dir, auditDir string) Report {
	_, rep := verify(dir, auditDir, nil)
	return rep
}

// verify is [Verify], keeping the hashes at the seqs in keep.
func verify(dir, auditDir string, keep map[int64]bool) (*state, Report) {
	path := filepath.Join(dir, FileName)
	st, err := scan(path, keep)
	if err != nil {
		return nil, Report{Head: audit.Genesis, Problem: &Problem{File: FileName, Msg: err.Error()}}
	}
	rep := Report{Lines: st.lines, Requests: st.nreq, Responses: st.nresp, Head: st.prev, Problem: st.problem}
	if rep.Problem != nil || auditDir == "" {
		return st, rep
	}
	idx, err := indexAudit(auditDir)
	if err != nil {
		rep.Problem = &Problem{File: FileName, Msg: "the audit log could not be read for the links: " + err.Error()}
		return st, rep
	}
	logged := map[int64]bool{} // audit decision -> its request has a response
	seqs := make([]int64, 0, len(st.links))
	for s := range st.links {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	for _, s := range seqs {
		l := st.links[s]
		got, ok := idx.hash[l.decision]
		switch {
		case !ok || got != l.sha:
			rep.Problem = &Problem{File: FileName, Line: l.line, Msg: fmt.Sprintf("decision_sha256 is not the hash of audit record %d", l.decision)}
			return st, rep
		case !idx.consult[l.decision]:
			rep.Problem = &Problem{File: FileName, Line: l.line, Msg: fmt.Sprintf("audit record %d did not allow or ask for a consult", l.decision)}
			return st, rep
		}
		logged[l.decision] = logged[l.decision] || st.answered[s]
	}
	for _, d := range idx.results {
		if !logged[d] {
			// brokerd logs the response before the audit result, so a
			// result with no request, or no response, here means lines
			// were removed (the end of the log cut off, too).
			rep.Problem = &Problem{File: FileName, Msg: fmt.Sprintf("the audit log records a result for consult %d, and this log holds no request with a response for it: an unlogged payload, or lines removed", d)}
			return st, rep
		}
	}
	return st, rep
}

// auditIndex is what Verify needs of the audit log.
type auditIndex struct {
	hash    map[int64]string // seq -> line hash
	consult map[int64]bool   // consult decisions that were allowed or asked
	results []int64          // consult decisions with a result, in order
}

func indexAudit(dir string) (*auditIndex, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	idx := &auditIndex{hash: map[int64]string{}, consult: map[int64]bool{}}
	var seq int64
	for _, e := range ents { // ReadDir sorts by name: the log's order
		if !audit.IsLogName(e.Name()) {
			continue
		}
		err := jsonl.Scan(filepath.Join(dir, e.Name()), audit.MaxLine+1, func(_ int, b []byte) error {
			seq++
			idx.hash[seq] = audit.LineHash(b)
			r, err := audit.ParseLine(b)
			if err != nil {
				return nil // the audit verifier names damage there
			}
			switch r := r.(type) {
			case *audit.Decision:
				if r.Record.Tool == toolset.Consult && r.Record.Outcome != audit.Denied {
					idx.consult[r.Seq] = true
				}
			case *audit.Result:
				if idx.consult[r.Decision] {
					idx.results = append(idx.results, r.Decision)
				}
			}
			return nil
		})
		var torn *jsonl.TornError
		if err != nil && !errors.As(err, &torn) {
			return nil, err
		}
	}
	return idx, nil
}

// AuditHash is the hash of audit record seq's line in auditDir, which a
// request links to. It reads the audit log from its start: consults are
// rare and slow, and the line, once written, never changes.
func AuditHash(auditDir string, seq int64) (string, error) {
	idx, err := indexAudit(auditDir)
	if err != nil {
		return "", fmt.Errorf("consult log: read the audit log: %v", err)
	}
	h, ok := idx.hash[seq]
	if !ok {
		return "", fmt.Errorf("consult log: the audit log has no record %d", seq)
	}
	return h, nil
}
