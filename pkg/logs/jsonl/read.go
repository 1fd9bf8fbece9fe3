package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// DefaultMaxLine caps one record when reading. Tool results are capped
// long before they are logged, so a longer line is damage, not data.
const DefaultMaxLine = 4 << 20

// Scan calls fn for each complete line of the file at path, with its
// 1-based number and its bytes (without the newline; valid only during
// the call). A torn last line is reported as a [*TornError] after every
// complete line has been passed to fn, so a reader can decide what the
// damage means. A line over maxLine is an error naming it.
func Scan(path string, maxLine int, fn func(line int, b []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("scan log: %w", err)
	}
	defer f.Close()
	return ScanReader(f, path, maxLine, fn)
}

// ScanReader is [Scan] over a reader; name labels errors.
func ScanReader(r io.Reader, name string, maxLine int, fn func(line int, b []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	for n := 1; ; n++ {
		b, err := readLine(br, maxLine)
		if errors.Is(err, errLong) {
			return fmt.Errorf("%s:%d: line longer than %d bytes", name, n, maxLine)
		}
		if err == io.EOF && len(b) == 0 {
			return nil
		}
		if err == io.EOF {
			return &TornError{Path: name, Line: n, Offset: off}
		}
		if err != nil {
			return fmt.Errorf("scan %s:%d: %w", name, n, err)
		}
		if err := fn(n, bytes.TrimSuffix(b, []byte("\n"))); err != nil {
			return err
		}
		off += int64(len(b))
	}
}

var errLong = errors.New("line too long")

// readLine returns one line including its newline, or what is left at EOF.
func readLine(br *bufio.Reader, maxLine int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine+1 {
			return nil, errLong
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, err
	}
}
