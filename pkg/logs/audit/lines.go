package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// line is one line of the log as the verifier sees it.
type line struct {
	file string // base name of its file
	n    int    // 1-based number within the file
	pos  int64  // 1-based position in the whole log: the seq it must carry
	data []byte // its bytes, newline excluded; nil when over MaxLine
	long bool   // over MaxLine: hashed, not kept, never parsed
	sum  [sha256.Size]byte
	size int64
	torn bool // no final newline: the last line of its file, cut short

	parsed bool // rec and err are set
	rec    Record
	err    error
}

// parse decodes the line once.
func (l *line) parse() (Record, error) {
	if !l.parsed {
		l.parsed = true
		if l.long {
			l.err = fmt.Errorf("line of %d bytes is over the limit of %d", l.size, MaxLine)
		} else {
			l.rec, l.err = ParseLine(l.data)
		}
	}
	return l.rec, l.err
}

func (l *line) where() string { return fmt.Sprintf("%s:%d", l.file, l.n) }

// listLogs returns the log files in dir, in order. Other names are
// ignored; a log name that is not a regular file is an error, since the
// writer would follow a link where the verifier could not vouch for it.
func listLogs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read audit dir: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !IsLogName(e.Name()) {
			continue
		}
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", e.Name())
		}
		names = append(names, e.Name())
	}
	return names, nil // os.ReadDir sorts by name
}

// source yields the lines of a list of files as one sequence.
type source struct {
	dir   string
	files []string
	next  int   // index of the next file to open
	pos   int64 // position of the last line yielded
	f     *os.File
	br    *bufio.Reader
	name  string
	n     int
}

// read returns the next line, or nil at the end of the last file.
func (s *source) read() (*line, error) {
	for {
		if s.f == nil {
			if s.next == len(s.files) {
				return nil, nil
			}
			s.name = s.files[s.next]
			s.next++
			f, err := os.Open(filepath.Join(s.dir, s.name))
			if err != nil {
				return nil, fmt.Errorf("open %s: %w", s.name, err)
			}
			s.f, s.br, s.n = f, bufio.NewReaderSize(f, 64<<10), 0
		}
		l, err := readLine(s.br)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("read %s:%d: %w", s.name, s.n+1, err)
		}
		if l == nil {
			s.close()
			continue
		}
		s.n++
		s.pos++
		l.file, l.n, l.pos = s.name, s.n, s.pos
		return l, nil
	}
}

func (s *source) close() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// readLine reads one line, hashing all of it and keeping at most MaxLine
// bytes. It returns nil at the end of the file.
func readLine(br *bufio.Reader) (*line, error) {
	h := sha256.New()
	l := &line{}
	seen := false
	for {
		chunk, err := br.ReadSlice('\n')
		seen = seen || len(chunk) > 0
		body, nl := bytes.CutSuffix(chunk, []byte("\n"))
		h.Write(body)
		l.size += int64(len(body))
		switch {
		case l.long:
		case l.size > MaxLine:
			l.long, l.data = true, nil
		default:
			l.data = append(l.data, body...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if !nl && !seen {
			return nil, nil
		}
		l.torn = !nl
		h.Sum(l.sum[:0])
		return l, nil
	}
}

// countLines counts the lines of a file, a torn last line included,
// without reading them as records.
func countLines(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var n int64
	last := byte('\n')
	for {
		k, err := f.Read(buf)
		if k > 0 {
			n += int64(bytes.Count(buf[:k], []byte("\n")))
			last = buf[k-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		n++
	}
	return n, nil
}
