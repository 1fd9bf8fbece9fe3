package audit

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
)

// ErrUnavailable is returned by every append after one failed: a write,
// an fsync or opening the next day's file. brokerd then denies every call
// with audit_unavailable until it is restarted, and the restart's Open
// recovers a line the failure may have cut.
var ErrUnavailable = errors.New("audit log unavailable after a failed write: brokerd denies every call until restarted; see docs/runbook.md#audit-unavailable")

// Options configures a [Writer].
type Options struct {
	// Now is the clock; nil means time.Now. A record's time and file come
	// from it, so tests can step it back over midnight.
	Now func() time.Time

	// noHead leaves the head record out, for this package's tests of the
	// chain's own damage handling: they cut and edit the files in ways
	// no crash of the writer can, which the head would refuse.
	noHead bool
}

// appender is the part of *jsonl.Writer the audit writer uses; tests put
// a failing one in its place.
type appender interface {
	Append(v any) (int, error)
	Lines() int
	Close() error
}

func openJSONL(path string) (appender, error) { return jsonl.Open(path) }

// Writer appends records to the audit log. It is safe for concurrent use:
// one mutex orders every append, and an append returns only after its line
// is fsynced. Only [Open] makes one, after verifying the chain.
type Writer struct {
	mu sync.Mutex // guards every field below; held across each write and fsync

	dir       string
	now       func() time.Time
	v         *verifier // the chain as verified, extended by every append
	name      string    // the latest log file; "" until the first is created
	f         appender  // open on name, or nil before the first file exists
	openFn    func(path string) (appender, error)
	broken    error // the first failed write, wrapping ErrUnavailable
	closed    bool
	recovered *Recovery // what Open recovered, if anything

	headPath string // HeadPath(dir); "" only in tests of the chain alone
	head     *Head  // the head record as load read it; nil when absent
	headErr  error  // why it could not be read
}

// Open verifies the log in dir and returns a writer that appends to its
// latest file. An ordinary start checks the latest two files (an ask may
// wait a day for its answer), chained from the line before them; when that
// line or the previous file's last line is torn or does not parse, it
// checks the whole log instead. A broken chain is refused with a
// [*Problem] naming file:line (see [AcceptBreak]). A torn or unparseable
// last line is recovered: the missing newline, if any, is added, and a
// [Recovery] describing the line is appended.
func Open(dir string, opts Options) (*Writer, error) {
	w, err := load(dir, opts, false)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if p := w.v.region; p != nil && !p.Recoverable {
		w.closeLocked()
		return nil, fmt.Errorf("open audit log %s: %w", dir, p)
	}
	if err := w.startHead(); err != nil {
		w.closeLocked()
		return nil, fmt.Errorf("open audit log %s: %w", dir, err)
	}
	if p := w.v.region; p != nil {
		if err := w.recoverLast(); err != nil {
			w.closeLocked()
			return nil, err
		}
	}
	return w, nil
}

// load verifies the log (the whole of it if full) and opens its latest
// file for appending, unless that file ends in a torn line: jsonl refuses
// those, and the caller ends the line first.
func load(dir string, opts Options, full bool) (*Writer, error) {
	// A missing directory is a wrong path, not an empty log: starting a
	// new chain there would hide the real one.
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("open audit log: %v; see docs/runbook.md#audit-unreadable", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("open audit log: %s is not a directory; see docs/runbook.md#audit-unreadable", dir)
	}
	files, err := listLogs(dir)
	if err != nil {
		return nil, fmt.Errorf("open audit log %s: %v; see docs/runbook.md#audit-unreadable", dir, err)
	}
	var head *Head
	var headErr error
	headPath := ""
	if !opts.noHead {
		headPath = HeadPath(dir)
		head, headErr = ReadHead(headPath)
	}
	var v *verifier
	var src *source
	if !full {
		if v, src, err = resume(dir, files); err != nil {
			return nil, fmt.Errorf("open audit log %s: %v; see docs/runbook.md#audit-unreadable", dir, err)
		}
		if v != nil && head != nil && head.Seq < v.pos {
			v = nil // the head lies before the lines a resumed check reads
		}
	}
	if v == nil {
		v, src = newVerifier(), &source{dir: dir, files: files}
		v.files = len(files)
	}
	if head != nil {
		v.keep(head.Seq)
	}
	v.run(src)
	if p := v.region; p != nil && p.Unreadable {
		return nil, fmt.Errorf("open audit log %s: %w", dir, p)
	}
	v.strict = true
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	w := &Writer{dir: dir, now: now, v: v, openFn: openJSONL, headPath: headPath, head: head, headErr: headErr}
	if len(files) > 0 {
		w.name = files[len(files)-1]
		if v.last == nil || v.last.file != w.name || !v.last.torn {
			if w.f, err = w.openFn(filepath.Join(dir, w.name)); err != nil {
				return nil, fmt.Errorf("open audit log %s: %v; see docs/runbook.md#audit-unreadable", dir, err)
			}
		}
	}
	return w, nil
}

// recoverLast appends a Recovery for the damaged last line of the log.
func (w *Writer) recoverLast() error {
	d := w.v.last
	r := &Recovery{File: d.file, Line: d.n, Damage: Unparseable, Action: NoAction, SHA256: hashHex(d.sum), Size: d.size}
	if d.torn {
		r.Damage = Torn
		if d.file == w.name {
			r.Action = EndedLine
			if err := w.endTornLine(d); err != nil {
				return err
			}
		}
	}
	// The damaged line is recovered by the record about to follow it;
	// the verifier checks that record against it before it is written.
	w.v.region = nil
	w.v.recovered = append(w.v.recovered, d.where())
	if _, err := w.appendLocked(r, false); err != nil {
		return fmt.Errorf("open audit log %s: recover %s: %w", w.dir, d.where(), err)
	}
	w.recovered = r
	return nil
}

// endTornLine has jsonl end a torn last line with the newline it lacks
// (only if the file still ends with exactly the bytes the verifier hashed),
// then opens the file through jsonl.
func (w *Writer) endTornLine(d *line) error {
	path := filepath.Join(w.dir, d.file)
	if err := jsonl.EndTornLine(path, d.size, d.sum); err != nil {
		return fmt.Errorf("open audit log %s: %s: %v; see docs/runbook.md#audit-torn", w.dir, d.where(), err)
	}
	d.torn = false
	var err error
	if w.f, err = w.openFn(path); err != nil {
		return fmt.Errorf("open audit log %s: end torn line %s: %v; see docs/runbook.md#audit-torn", w.dir, d.where(), err)
	}
	return nil
}

// Append writes a *Decision, *Approval, *Result, *Allowance or
// *AllowanceEnd as the next line of the
// log and returns its seq, which is an approval's id. It sets r's Seq, Time
// and Prev. It returns only after the line is fsynced, so a caller that
// got nil may act on the record.
//
// A record the verifier would refuse (an invalid field, a result for no
// allowed call, an approval for no pending ask) is refused and nothing is
// written. A failed write is different: after one, every append returns
// an error wrapping [ErrUnavailable].
func (w *Writer) Append(r Record) (int64, error) {
	var ok bool
	switch v := r.(type) {
	case *Decision:
		ok = v != nil
	case *Approval:
		ok = v != nil
	case *Result:
		ok = v != nil
	case *Allowance:
		ok = v != nil
	case *AllowanceEnd:
		ok = v != nil
	case *Recovery, *AcceptedBreak:
		return 0, fmt.Errorf("append audit record: a %s record is written only by the writer itself", r.Tag())
	}
	if !ok {
		return 0, fmt.Errorf("append audit record: %T is not a record a caller may append", r)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.appendLocked(r, true)
}

// appendLocked writes r. With rotate, a record goes in the file of
// today's UTC date when that is later than the latest file; otherwise,
// and always when the clock is behind the latest file, in the latest file.
func (w *Writer) appendLocked(r Record, rotate bool) (int64, error) {
	if w.broken != nil {
		return 0, w.broken
	}
	if w.closed {
		return 0, errors.New("append audit record: the writer is closed")
	}
	now := w.now().UTC()
	r.setHead(Header{Seq: w.v.pos + 1, Time: now.Format(TimeLayout), Prev: hashHex(w.v.prev)})
	b, err := encode(r)
	if err != nil {
		return 0, fmt.Errorf("append audit record: %w", err)
	}
	rec, err := ParseLine(b)
	if err != nil {
		return 0, fmt.Errorf("append audit record: invalid %s record: %w", r.Tag(), err)
	}
	l := &line{file: w.name, pos: w.v.pos + 1, data: b, sum: sha256.Sum256(b), size: int64(len(b)), parsed: true, rec: rec}
	if p := w.v.admit(l); p != nil {
		return 0, fmt.Errorf("append audit record: refused, the verifier would reject it: %s", p.Reason)
	}
	if w.headPath != "" {
		// Step 1 of the head record: the line about to be written.
		if err := WriteHead(w.headPath, Head{Seq: w.v.pos, Hash: hashHex(w.v.prev), Next: hashHex(l.sum)}); err != nil {
			return 0, w.fail(err)
		}
	}
	if rotate || w.f == nil {
		if err := w.rotate(now); err != nil {
			return 0, w.fail(err)
		}
	}
	l.file, l.n = w.name, w.f.Lines()+1
	n, err := w.f.Append(json.RawMessage(b))
	if err != nil {
		return 0, w.fail(err)
	}
	if n != l.n {
		return 0, w.fail(fmt.Errorf("wrote line %d of %s, expected line %d: another process writes this log", n, w.name, l.n))
	}
	w.v.commit(l)
	if w.headPath != "" {
		// Step 2: the line is on disk.
		if err := WriteHead(w.headPath, Head{Seq: l.pos, Hash: hashHex(l.sum)}); err != nil {
			return 0, w.fail(err)
		}
	}
	return l.pos, nil
}

// startHead judges the log's end against the head record and, when the
// log may go on, records its end as the head (settling an append a crash
// left under way).
func (w *Writer) startHead() error {
	if w.headPath == "" {
		return nil
	}
	end, err := StartHead(AuditHead, w.headPath, w.head, w.headErr, w.v.ends())
	if err != nil {
		return err
	}
	w.head, w.headErr = &end, nil
	return nil
}

// rotate moves to the file of now's date if that is later than the
// latest file. It never moves back: with the clock behind, records go on
// into the latest file, and the chain does not care about dates.
func (w *Writer) rotate(now time.Time) error {
	target := logName(now)
	if target < w.name {
		target = w.name // never back to an earlier day's file
	}
	if w.f != nil && target == w.name {
		return nil
	}
	f, err := w.openFn(filepath.Join(w.dir, target))
	if err != nil {
		return err
	}
	if target != w.name && f.Lines() != 0 {
		f.Close()
		return fmt.Errorf("%s appeared with %d lines: another process writes this log", target, f.Lines())
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f, w.name = f, target
	return nil
}

func (w *Writer) fail(err error) error {
	w.broken = fmt.Errorf("append audit record to %s: %v: %w", w.dir, err, ErrUnavailable)
	return w.broken
}

// Recovered returns the recovery Open appended, or nil.
func (w *Writer) Recovered() *Recovery {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recovered
}

// Head returns the seq and hex hash of the last line of the log.
func (w *Writer) Head() (int64, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.v.pos, hashHex(w.v.prev)
}

// Close closes the log file. Later appends fail.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closeLocked()
}

func (w *Writer) closeLocked() error {
	w.closed = true
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// AcceptBreak is brokerd --accept-break. It verifies the whole log and,
// if it finds a break, appends to the latest file an [AcceptedBreak]
// naming it (after ending a torn last line and recording that with a
// [Recovery]), and returns that record; [Open] then succeeds. With nothing
// to accept (an intact log, or only a damaged last line, which Open
// recovers) it writes nothing and returns nil. It accepts the first break
// only; run it again for the next.
func AcceptBreak(dir string, opts Options) (*AcceptedBreak, error) {
	w, err := load(dir, opts, true)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.closeLocked()
	p := w.v.region
	if p == nil || p.Recoverable {
		return nil, nil
	}
	// A break is accepted only in a log that ends where brokerd left it:
	// accepting would otherwise record a removed or added end as good.
	if err := w.startHead(); err != nil {
		return nil, fmt.Errorf("accept break: %w", err)
	}
	if d := w.v.last; d.torn && d.file == w.name {
		if err := w.endTornLine(d); err != nil {
			return nil, err
		}
		r := &Recovery{File: d.file, Line: d.n, Damage: Torn, Action: EndedLine, SHA256: hashHex(d.sum), Size: d.size}
		if _, err := w.appendLocked(r, false); err != nil {
			return nil, fmt.Errorf("accept break: %w", err)
		}
	}
	ab := &AcceptedBreak{File: p.File, Line: p.Line, LastGood: p.LastGood}
	if _, err := w.appendLocked(ab, false); err != nil {
		return nil, fmt.Errorf("accept break at %s: %w", p.Where(), err)
	}
	if w.v.region != nil {
		return nil, fmt.Errorf("accept break at %s: the record written does not close the break", p.Where())
	}
	if err := w.closeLocked(); err != nil {
		return nil, fmt.Errorf("accept break: close: %w", err)
	}
	return ab, nil
}
