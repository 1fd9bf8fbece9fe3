package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, body := range []string{`{}`, `{"a":1}`, string(bytes.Repeat([]byte("x"), 100))} {
		if err := Write(&buf, []byte(body), 100); err != nil {
			t.Fatalf("Write(%q): %v", body, err)
		}
	}
	for _, want := range []string{`{}`, `{"a":1}`, string(bytes.Repeat([]byte("x"), 100))} {
		got, err := Read(iotest.OneByteReader(&buf), 100)
		if err != nil || string(got) != want {
			t.Fatalf("Read = %q, %v; want %q", got, err, want)
		}
	}
	if _, err := Read(&buf, 100); err != io.EOF {
		t.Errorf("Read at end = %v, want io.EOF", err)
	}
}

// countingReader fails the test if more than limit bytes are read, which
// proves the cap is checked before the body is touched.
type countingReader struct {
	r     io.Reader
	n     int
	limit int
	t     *testing.T
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	if c.n > c.limit {
		c.t.Fatalf("read %d bytes, more than the %d-byte header", c.n, c.limit)
	}
	return n, err
}

func TestCapBeforeAllocation(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 0xFFFFFFFF)
	r := &countingReader{r: io.MultiReader(bytes.NewReader(hdr[:]), neverEnding{}), limit: 4, t: t}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Read(r, 1024)
	runtime.ReadMemStats(&after)
	var se *SizeError
	if !errors.As(err, &se) || !errors.Is(err, ErrTooLarge) || se.Size != 0xFFFFFFFF || se.Max != 1024 {
		t.Fatalf("Read(4 GiB header) = %v, want SizeError", err)
	}
	// The error values allocate a few bytes; a body would be 4 GiB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Errorf("Read of an oversized frame allocated %d bytes", got)
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) { return len(p), nil }

func TestRefusals(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"empty frame", []byte{0, 0, 0, 0}, 10, ErrEmpty},
		{"over cap by one", []byte{0, 0, 0, 11}, 10, ErrTooLarge},
		{"short header", []byte{0, 0}, 10, io.ErrUnexpectedEOF},
		{"short body", []byte{0, 0, 0, 5, '{', '}'}, 10, io.ErrUnexpectedEOF},
		{"header only", []byte{0, 0, 0, 5}, 10, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.in), tt.max)
			if !errors.Is(err, tt.want) {
				t.Errorf("Read(%v) = %v, want %v", tt.in, err, tt.want)
			}
		})
	}
	for _, max := range []int{0, -1, HardMax + 1} {
		if _, err := Read(bytes.NewReader([]byte{0, 0, 0, 1, 'x'}), max); err == nil {
			t.Errorf("Read with cap %d succeeded", max)
		}
	}
	if err := Write(io.Discard, make([]byte, 11), 10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Write over cap = %v", err)
	}
	if err := Write(io.Discard, nil, 10); !errors.Is(err, ErrEmpty) {
		t.Errorf("Write empty = %v", err)
	}
}

// FuzzRead checks that any byte stream is either refused or yields frames
// that re-encode to exactly the bytes consumed, and never a frame over the
// cap.
func FuzzRead(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, '{', '}'}, uint16(16))
	f.Add([]byte{0, 0, 0, 0}, uint16(16))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint16(16))
	f.Add([]byte{0, 0, 0, 17}, uint16(16))
	f.Add([]byte{0, 0}, uint16(16))
	f.Add([]byte{0, 0, 0, 3, 'a'}, uint16(16))
	f.Add([]byte{0, 0, 0, 1, 'a', 0, 0, 0, 1, 'b'}, uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, max16 uint16) {
		max := int(max16) + 1
		r := bytes.NewReader(data)
		var again bytes.Buffer
		for {
			before := r.Len()
			body, err := Read(r, max)
			if err != nil {
				return
			}
			if len(body) == 0 || len(body) > max {
				t.Fatalf("Read returned %d bytes with cap %d", len(body), max)
			}
			if err := Write(&again, body, max); err != nil {
				t.Fatalf("Write of a read frame: %v", err)
			}
			consumed := data[len(data)-before : len(data)-r.Len()]
			if !bytes.Equal(again.Bytes(), consumed) {
				t.Fatalf("re-encoded %x, consumed %x", again.Bytes(), consumed)
			}
			again.Reset()
		}
	})
}
