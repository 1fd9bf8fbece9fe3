package jsonl

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
)

// ErrChanged is returned by [EndTornLine] when the file no longer ends
// with the torn line the caller checked.
var ErrChanged = errors.New("the file changed since it was verified")

// EndTornLine ends a torn last line with the newline it lacks, so that the
// file can be opened again. It is for logs whose own format records the
// repair (the audit log appends a recovery record right after); a session
// log is never ended this way (docs/runbook.md#torn-log leaves that to the
// owner). The caller names the torn line by its size and SHA-256, as it
// verified it; the newline is written only if the file still ends with
// exactly those bytes and they hold no newline, so a line is never ended
// that was not checked. The write is fsynced before EndTornLine returns.
func EndTornLine(path string, size int64, sum [sha256.Size]byte) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("end torn line: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("end torn line: %w", err)
	}
	if size <= 0 || fi.Size() < size {
		return fmt.Errorf("end torn line: %w", ErrChanged)
	}
	h := sha256.New()
	buf := make([]byte, 64<<10)
	for off := fi.Size() - size; off < fi.Size(); {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), fi.Size()-off)], off)
		if err != nil {
			return fmt.Errorf("end torn line: %w", err)
		}
		if bytes.IndexByte(buf[:n], '\n') >= 0 {
			return fmt.Errorf("end torn line: %w", ErrChanged)
		}
		h.Write(buf[:n])
		off += int64(n)
	}
	if !bytes.Equal(h.Sum(nil), sum[:]) {
		return fmt.Errorf("end torn line: %w", ErrChanged)
	}
	if _, err := f.Write([]byte("\n")); err != nil {
		return fmt.Errorf("end torn line: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("end torn line: %w", err)
	}
	return nil
}
