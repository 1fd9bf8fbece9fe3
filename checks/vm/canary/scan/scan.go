// Package scan searches bytes for canaries (byte strings a test planted
// or must never find) and carries the canary scanner's request and
// report between the host and checks/vm/canary in the guest.
//
// Invariant: a canary is found wherever its bytes occur in what is
// scanned, whether in one read or across the boundary of two: a [Scanner]
// keeps the last len-1 bytes of each chunk in front of the next.
package scan

import (
	"bytes"
	"io"
	"os"
	"syscall"
)

// Request is what the scanner reads on stdin.
type Request struct {
	Canaries [][]byte `json:"canaries"` // base64 in JSON
}

// Report is what it writes: the hits, how much it read, and every place
// it could not read.
type Report struct {
	Hits    []Hit    `json:"hits"`
	Files   int      `json:"files"`
	Bytes   int64    `json:"bytes"`
	Procs   int      `json:"procs"`
	Skipped []string `json:"skipped"` // pseudo filesystems passed over, with their type
	Errors  []string `json:"errors"`
}

// Hit is one place that holds a canary.
type Hit struct {
	Canary int    `json:"canary"` // its index in the request
	Kind   string `json:"kind"`   // "file", "environ" or "cmdline"
	Path   string `json:"path"`
	Comm   string `json:"comm,omitempty"` // the process's name, for environ and cmdline
}

func (h Hit) String() string {
	if h.Comm != "" {
		return h.Kind + " " + h.Path + " (" + h.Comm + ")"
	}
	return h.Kind + " " + h.Path
}

// Chunk is how much a Scanner reads at a time.
const Chunk = 1 << 20

// Scanner finds canaries.
type Scanner struct {
	canaries [][]byte
	longest  int
	buf      []byte
}

// New is a Scanner for canaries (each non-empty).
func New(canaries [][]byte) *Scanner {
	s := &Scanner{canaries: canaries}
	for _, c := range canaries {
		s.longest = max(s.longest, len(c))
	}
	return s
}

// In lists the indexes of the canaries b holds.
func (s *Scanner) In(b []byte) []int {
	var hits []int
	for i, c := range s.canaries {
		if bytes.Contains(b, c) {
			hits = append(hits, i)
		}
	}
	return hits
}

// Reader lists the indexes of the canaries r's bytes hold, and how many
// bytes it read, reading Chunk bytes at a time.
func (s *Scanner) Reader(r io.Reader) (hits []int, n int64, err error) {
	if s.buf == nil {
		s.buf = make([]byte, Chunk+s.longest)
	}
	seen := make([]bool, len(s.canaries))
	carry := 0
	for {
		m, rerr := io.ReadFull(r, s.buf[carry:])
		n += int64(m)
		data := s.buf[:carry+m]
		for i, c := range s.canaries {
			if !seen[i] && bytes.Contains(data, c) {
				seen[i] = true
				hits = append(hits, i)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return hits, n, nil
		}
		if rerr != nil {
			return hits, n, rerr
		}
		// A canary that starts in this chunk's last longest-1 bytes ends
		// in the next one.
		carry = min(s.longest-1, len(data))
		copy(s.buf, data[len(data)-carry:])
	}
}

// File scans the regular file at path without following a link.
func (s *Scanner) File(path string) ([]int, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return s.Reader(f)
}
