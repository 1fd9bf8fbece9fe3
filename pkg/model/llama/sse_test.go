package llama

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestSSEDecoder(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []string
		err    error
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"a", "b"}, io.EOF},
		{"crlf multi-line", "data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", []string{"a\nb", "c"}, io.EOF},
		{"cr multi-line", "data: a\rdata: b\r\rdata: c\r\r", []string{"a\nb", "c"}, io.EOF},
		{"cr lines before an lf", "data: a\rdata: b\r\rdata: c\n\n", []string{"a\nb", "c"}, io.EOF},
		{"mixed endings", "data: a\r\ndata: b\ndata: c\r\r\n", []string{"a\nb\nc"}, io.EOF},
		{"comments", ":\n\n: ping\ndata: a\n:x\ndata: b\n\n:\n\n", []string{"a\nb"}, io.EOF},
		{"one optional space", "data:a\n\ndata:  a\n\n", []string{"a", " a"}, io.EOF},
		{"field without colon", "data\n\n", []string{""}, io.EOF},
		{"empty data dispatches", "data:\n\n", []string{""}, io.EOF},
		{"other fields ignored", "event: x\nid: 1\nretry: 5\ndatum: no\ndata: a\n\n", []string{"a"}, io.EOF},
		{"blank lines alone", "\n\n\r\n\r\r", nil, io.EOF},
		{"unterminated event dropped", "data: a\n\ndata: b\n", []string{"a"}, io.EOF},
		{"unterminated line dropped", "data: a\n\ndata: b", []string{"a"}, io.EOF},
		{"colon in value", "data: {\"a\":1}\n\n", []string{`{"a":1}`}, io.EOF},
		{"line at cap", "data: " + strings.Repeat("x", 58) + "\n\n", []string{strings.Repeat("x", 58)}, io.EOF},
		{"line over cap", "data: " + strings.Repeat("x", 59) + "\n\n", nil, errEventTooLarge{64}},
		{"event over cap", "data: " + strings.Repeat("x", 40) + "\ndata: " + strings.Repeat("x", 40) + "\n\n", nil, errEventTooLarge{64}},
		{"comment over cap", ":" + strings.Repeat("x", 64) + "\n\ndata: a\n\n", nil, errEventTooLarge{64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				var r io.Reader = strings.NewReader(tt.stream)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				d := newSSEDecoder(r, 64)
				var got []string
				var err error
				for {
					var ev []byte
					if ev, err = d.next(); err != nil {
						break
					}
					got = append(got, string(ev))
				}
				if !reflect.DeepEqual(got, tt.want) || !errors.Is(err, tt.err) {
					t.Fatalf("decode(%q, oneByte=%v) = %q, %v; want %q, %v", tt.stream, oneByte, got, err, tt.want, tt.err)
				}
			}
		})
	}
}

// TestSSENoProgress: a reader that keeps returning (0, nil) ends the stream
// instead of spinning.
func TestSSENoProgress(t *testing.T) {
	d := newSSEDecoder(zeroReader{}, 64)
	if _, err := d.next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("next = %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }
