package llama

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

const testID = "chatcmpl-Q3x9Kf2LmN8pR4tV7wY1zA5bC6dE0gH2"

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parsed is everything readStream produces from one byte stream.
type parsed struct {
	comp   *Completion
	events []Event
	capIDs []string
	// capAfter is how many reasoning events had been seen when the cap
	// callback ran.
	capAfter []int
	err      error
}

// parse runs the SSE decoder and accumulator over r, the way Complete does
// but without HTTP.
func parse(r io.Reader, maxEvent, capAt int) parsed {
	var p parsed
	a := &accumulator{
		capAt:   capAt,
		onEvent: func(ev Event) { p.events = append(p.events, ev) },
		onCap: func(id string) {
			n := 0
			for _, ev := range p.events {
				if ev.Kind == EventReasoning {
					n++
				}
			}
			p.capIDs = append(p.capIDs, id)
			p.capAfter = append(p.capAfter, n)
		},
	}
	p.err = readStream(r, maxEvent, a)
	if p.err == nil {
		p.comp = a.completion()
	}
	return p
}

// splitReader returns its data in two reads split at n, then EOF.
type splitReader struct {
	parts [][]byte
}

func newSplitReader(b []byte, n int) *splitReader {
	return &splitReader{parts: [][]byte{b[:n], b[n:]}}
}

func (s *splitReader) Read(p []byte) (int, error) {
	for len(s.parts) > 0 && len(s.parts[0]) == 0 {
		s.parts = s.parts[1:]
	}
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.parts[0])
	s.parts[0] = s.parts[0][n:]
	return n, nil
}

// chunkReader returns its data in reads whose sizes cycle through sizes.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = c.sizes[c.i%len(c.sizes)]
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
