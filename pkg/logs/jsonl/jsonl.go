// Package jsonl is the append-only writer (and reader) of Boxmaker's
// JSON-lines logs: session logs, the audit log, the consult log, the
// memory journal, gatewayd's dead-post log. One file is appended by hand:
// the owner's audit anchors (bxctl audit anchor), which bxctl writes
// itself after checking the file is the owner's.
//
// Invariants:
//   - a record is one line: the strict JSON encoding of a typed value
//     (never text built by string formatting), then '\n';
//   - [Writer.Append] returns only after the line is written in a single
//     write and fsynced; a caller that got nil may rely on the record
//     surviving a crash;
//   - after any failed write the writer refuses every later append, since
//     a partial line may now end the file;
//   - [Open] refuses a file whose last line is torn (no final newline)
//     with a [*TornError], rather than append after it and bury the
//     damage mid-file; what to do about it is the owner's call;
//   - files are created 0600, or with the mode the caller gives
//     ([OpenMode]: 0640 for session logs, which memoryd reads through its
//     group), and their directory is fsynced on creation so the new name
//     survives a crash too.
package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// TornError reports a last line with no newline: a write cut short.
type TornError struct {
	Path   string
	Line   int   // 1-based number of the torn line
	Offset int64 // byte offset where it starts
}

func (e *TornError) Error() string {
	return fmt.Sprintf("%s:%d: torn last line at byte %d (no final newline); see docs/runbook.md#torn-log", e.Path, e.Line, e.Offset)
}

// ErrBroken is returned by Append after an earlier write failed.
var ErrBroken = errors.New("log writer is broken by an earlier failed write; see docs/runbook.md#log-write-failed")

// Writer appends records to one file. It is safe for concurrent use.
type Writer struct {
	mu     sync.Mutex // guards f, broken and lines
	f      *os.File
	path   string
	broken error
	lines  int
}

// Open opens path for appending, creating it (0600) if needed. It counts
// the existing lines and refuses a torn last line.
func Open(path string) (*Writer, error) { return OpenMode(path, 0o600) }

// OpenMode is [Open] creating the file with mode perm (0640 for a log
// another role reads through its group, as memoryd reads loopd's).
func OpenMode(path string, perm os.FileMode) (*Writer, error) {
	_, statErr := os.Lstat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, perm)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	lines, err := countLines(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	if created {
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &Writer{f: f, path: path, lines: lines}, nil
}

// countLines reads the file once, returning its number of complete lines
// or a TornError.
func countLines(f *os.File, path string) (int, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("open log %s: %w", path, err)
	}
	buf := make([]byte, 64<<10)
	var lines int
	var off, lineStart int64
	for {
		n, err := f.Read(buf)
		for i, b := range buf[:n] {
			if b == '\n' {
				lines++
				lineStart = off + int64(i) + 1
			}
		}
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("open log %s: %w", path, err)
		}
	}
	if lineStart != off {
		return 0, &TornError{Path: path, Line: lines + 1, Offset: lineStart}
	}
	return lines, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync log dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync log dir: %w", err)
	}
	return nil
}

// Lines is the number of complete records in the file.
func (w *Writer) Lines() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines
}

// Path is the file's path.
func (w *Writer) Path() string { return w.path }

// Append encodes v strictly and writes it as one line, durably. It returns
// the record's 1-based line number.
func (w *Writer) Append(v any) (int, error) {
	line, err := strict.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", w.path, err)
	}
	// encoding/json escapes newlines inside strings; a raw one would mean
	// a custom marshaller broke the one-record-one-line rule.
	if bytes.IndexByte(line, '\n') >= 0 {
		return 0, fmt.Errorf("append to %s: encoded record contains a newline", w.path)
	}
	return w.appendLine(append(line, '\n'))
}

// AppendEncoded writes a record already encoded as one line of JSON (by a
// tagged union's Encode, for example). It refuses anything that is not a
// single valid JSON value without a newline.
func (w *Writer) AppendEncoded(line []byte) (int, error) {
	if !json.Valid(line) || bytes.IndexByte(line, '\n') >= 0 {
		return 0, fmt.Errorf("append to %s: not one line of valid JSON", w.path)
	}
	return w.appendLine(append(line[:len(line):len(line)], '\n'))
}

func (w *Writer) appendLine(line []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return 0, ErrBroken
	}
	if w.f == nil {
		return 0, fmt.Errorf("append to %s: writer is closed", w.path)
	}
	if _, err := w.f.Write(line); err != nil {
		w.broken = err
		return 0, fmt.Errorf("append to %s: %w; see docs/runbook.md#log-write-failed", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		w.broken = err
		return 0, fmt.Errorf("append to %s: fsync: %w; see docs/runbook.md#log-write-failed", w.path, err)
	}
	w.lines++
	return w.lines, nil
}

// Close closes the file. Later appends fail.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
