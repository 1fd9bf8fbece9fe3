package consultlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
)

// ErrDamaged is [Open]'s refusal of a log whose chain does not hold.
var ErrDamaged = errors.New("the consult log does not verify, so no consult runs until the owner looks at it; see docs/runbook.md#consult-log-damaged")

// Writer appends to the consult log. It is safe for concurrent use.
type Writer struct {
	mu       sync.Mutex // guards the fields below and the order of appends; held across each line and its head writes
	w        *jsonl.Writer
	headPath string // audit.HeadPath(dir)
	seq      int64
	prev     string
	requests map[int64]string // request seq -> its line hash
	broken   error            // the first failed write: every later append fails until brokerd restarts
	now      func() time.Time
}

// Open opens the log in dir (made 0700 if missing), checking its whole
// chain first, then its end against the head record: a log that ends
// before it or differs from it is refused with an [*audit.HeadError]
// (brokerd then refuses to start), a broken chain with [ErrDamaged].
func Open(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open consult log: %v", err)
	}
	path := filepath.Join(dir, FileName)
	headPath := audit.HeadPath(dir)
	head, herr := audit.ReadHead(headPath)
	st, err := scan(path, keepHead(head))
	if err != nil {
		return nil, fmt.Errorf("open consult log: %v", err)
	}
	if st.problem != nil {
		return nil, fmt.Errorf("open consult log: %s: %w", st.problem, ErrDamaged)
	}
	// The head before the file: a deleted log must not be recreated
	// empty and then found to end before its head only at the next start.
	if _, err := audit.StartHead(Head, headPath, head, herr, st.end()); err != nil {
		return nil, fmt.Errorf("open consult log %s: %w", dir, err)
	}
	w, err := jsonl.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open consult log: %v (%w)", err, ErrDamaged)
	}
	return &Writer{w: w, headPath: headPath, seq: st.seq, prev: st.prev, requests: st.requests, now: time.Now}, nil
}

// Request appends r, filling its header, and returns its seq and line
// hash. When it returns nil the line is on disk.
func (w *Writer) Request(r Request) (int64, string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seq, h, err := w.append(&r)
	if err == nil {
		w.requests[seq] = h
	}
	return seq, h, err
}

// Response appends the response to request r.Request, filling its
// header and the request's hash.
func (w *Writer) Response(r Response) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.requests[r.Request]
	if !ok {
		return 0, fmt.Errorf("append consult response: no request %d in the log", r.Request)
	}
	r.RequestSHA256 = h
	seq, _, err := w.append(&r)
	return seq, err
}

func (w *Writer) append(r Record) (int64, string, error) {
	h := r.head()
	h.Seq, h.Time, h.Prev = w.seq+1, w.now().UTC().Format(audit.TimeLayout), w.prev
	if err := validate(r); err != nil {
		return 0, "", fmt.Errorf("append consult %s: %v", r.Tag(), err)
	}
	line, err := records.Encode(r)
	if err != nil {
		return 0, "", fmt.Errorf("append consult %s: %v", r.Tag(), err)
	}
	if len(line) > MaxLine {
		return 0, "", fmt.Errorf("append consult %s: %d bytes, over the line limit of %d", r.Tag(), len(line), MaxLine)
	}
	if w.broken != nil {
		return 0, "", w.broken
	}
	// The head record, as the audit log's (package audit, "The head
	// record"): the line under way, the line, the line written.
	sum := audit.LineHash(line)
	if err := audit.WriteHead(w.headPath, audit.Head{Seq: w.seq, Hash: w.prev, Next: sum}); err != nil {
		return 0, "", w.fail(r, err)
	}
	if _, err := w.w.AppendEncoded(line); err != nil {
		return 0, "", w.fail(r, err)
	}
	w.seq, w.prev = h.Seq, sum
	if err := audit.WriteHead(w.headPath, audit.Head{Seq: w.seq, Hash: w.prev}); err != nil {
		return 0, "", w.fail(r, err)
	}
	return w.seq, w.prev, nil
}

// fail makes the writer refuse every later append: after a failed write
// the file or the head record may hold a state only a restart's [Open]
// can judge.
func (w *Writer) fail(r Record, err error) error {
	w.broken = fmt.Errorf("append consult %s: %v (%w)", r.Tag(), err, ErrDamaged)
	return w.broken
}

// Close closes the file.
func (w *Writer) Close() error { return w.w.Close() }
