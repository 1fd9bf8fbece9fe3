package scan

import (
	"bytes"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

// TestReaderFindsAcrossChunks: a canary is found at the start, the end,
// and straddling every boundary of two chunks, and read a byte at a time;
// one that is absent, or present only in part, is not.
func TestReaderFindsAcrossChunks(t *testing.T) {
	a, b := []byte("canary-a-0123456789"), []byte("canary-b-9876543210")
	s := New([][]byte{a, b})
	for _, at := range []int{0, 1, Chunk - len(a), Chunk - len(a) + 1, Chunk - 1, Chunk, 2*Chunk - 5, 3 * Chunk} {
		data := bytes.Repeat([]byte{'x'}, 3*Chunk+len(a))
		copy(data[at:], a)
		hits, n, err := s.Reader(bytes.NewReader(data))
		if err != nil || !slices.Equal(hits, []int{0}) || n != int64(len(data)) {
			t.Errorf("canary at %d: hits %v, %d bytes, %v; want [0] and all %d bytes", at, hits, n, err, len(data))
		}
	}
	data := append(bytes.Repeat([]byte{'y'}, Chunk-3), b...)
	if hits, _, _ := s.Reader(iotest.OneByteReader(bytes.NewReader(data))); !slices.Equal(hits, []int{1}) {
		t.Errorf("read a byte at a time: hits %v, want [1]", hits)
	}
	part := append(bytes.Repeat([]byte{'z'}, Chunk-5), a[:len(a)-1]...)
	if hits, _, _ := s.Reader(bytes.NewReader(part)); len(hits) != 0 {
		t.Errorf("a canary cut short: hits %v, want none", hits)
	}
	if hits := s.In(append(append([]byte("env=1\x00"), b...), 0)); !slices.Equal(hits, []int{1}) {
		t.Errorf("In = %v, want [1]", hits)
	}
}

// TestReaderReportsErrors: a read that fails is an error, not a clean
// "nothing found".
func TestReaderReportsErrors(t *testing.T) {
	s := New([][]byte{[]byte("canary-c-55555555")})
	if _, _, err := s.Reader(iotest.ErrReader(io.ErrClosedPipe)); err == nil {
		t.Error("Reader of a failing reader: no error")
	}
}

// FuzzReader: whatever the bytes around it and however they are read,
// a planted canary is found, and In agrees with Reader.
func FuzzReader(f *testing.F) {
	f.Add([]byte("prefix"), []byte("suffix"), []byte("canary-xy"), uint16(3))
	f.Fuzz(func(t *testing.T, before, after, canary []byte, split uint16) {
		if len(canary) == 0 {
			return
		}
		s := New([][]byte{canary})
		data := append(append(append([]byte{}, before...), canary...), after...)
		r := io.MultiReader(bytes.NewReader(data[:int(split)%(len(data)+1)]), bytes.NewReader(data[int(split)%(len(data)+1):]))
		hits, n, err := s.Reader(r)
		if err != nil || !slices.Equal(hits, []int{0}) || n != int64(len(data)) {
			t.Fatalf("Reader = %v, %d, %v", hits, n, err)
		}
		if !slices.Equal(s.In(data), hits) {
			t.Fatalf("In = %v, Reader = %v", s.In(data), hits)
		}
	})
}
