package llama

import (
	"bytes"
	"fmt"
	"io"
)

// sseReadSize is the read buffer of the SSE decoder. Events are small (one
// token each, a few hundred bytes), so one read usually holds many of them.
const sseReadSize = 8 << 10

// sseDecoder splits a text/event-stream into events, following the WHATWG
// "server-sent events" parsing rules as far as llama-server needs them:
//
//   - lines end in LF, CRLF or a lone CR, and an ending may be split
//     across reads;
//   - a line starting with ":" is a comment; llama-server sends ":" pings
//     while a stream is silent (reference: server-context.cpp:4339);
//   - "data:" lines are joined with LF, one optional space after the colon
//     is dropped, and a blank line dispatches the event;
//   - other fields (event, id, retry) are ignored; llama-server sends none;
//   - an event not closed by a blank line when the stream ends is dropped.
//
// The server writes each event as "data: <json>\n\n" and may put several in
// one write (reference: server-common.cpp:1584-1601); the decoder does not
// care how bytes are split into reads. A line or event longer than max is an
// error before it is buffered, since the peer controls the length.
type sseDecoder struct {
	r          io.Reader
	buf        []byte
	start, end int   // unread bytes are buf[start:end]
	lf         int   // index of the next LF in buf, end if none, -1 if not yet looked for
	rerr       error // sticky read error, returned once buf is drained
	line       []byte
	data       []byte // the current event's data
	hasData    bool   // a data field has been seen for the current event
	skipLF     bool   // the last line ended in CR; a following LF is part of it
	empty      int    // consecutive reads that returned nothing
	max        int
}

const maxEmptyReads = 100

func newSSEDecoder(r io.Reader, max int) *sseDecoder {
	return &sseDecoder{r: r, buf: make([]byte, sseReadSize), lf: -1, max: max}
}

// errEventTooLarge is the decoder's size error; readStream turns it into a
// *StreamError with the event number.
type errEventTooLarge struct{ max int }

func (e errEventTooLarge) Error() string {
	return fmt.Sprintf("sse line or event exceeds %d bytes", e.max)
}

// next returns the data of the next event. The slice is valid until the next
// call. At the end of the stream it returns the reader's error (io.EOF for a
// clean end).
func (d *sseDecoder) next() ([]byte, error) {
	for {
		for d.start < d.end {
			if d.skipLF {
				d.skipLF = false
				if d.buf[d.start] == '\n' {
					d.start++
					continue
				}
			}
			i := d.lineEnd()
			if i < 0 {
				// The line continues in the next read.
				b := d.buf[d.start:d.end]
				if len(d.line)+len(b) > d.max {
					return nil, errEventTooLarge{d.max}
				}
				d.line = append(d.line, b...)
				d.start = d.end
				break
			}
			line := d.buf[d.start:i]
			if len(d.line)+len(line) > d.max {
				return nil, errEventTooLarge{d.max}
			}
			if len(d.line) > 0 {
				d.line = append(d.line, line...)
				line = d.line
			}
			d.skipLF = d.buf[i] == '\r'
			d.start = i + 1
			ev, ok, err := d.processLine(line)
			d.line = d.line[:0]
			if err != nil {
				return nil, err
			}
			if ok {
				return ev, nil
			}
		}
		if d.rerr != nil {
			return nil, d.rerr
		}
		n, err := d.r.Read(d.buf)
		d.start, d.end, d.lf = 0, n, -1
		d.rerr = err
		if n == 0 && err == nil {
			// io.Reader allows (0, nil) but a reader that keeps doing it
			// would spin here forever; bufio gives up the same way.
			if d.empty++; d.empty >= maxEmptyReads {
				d.rerr = io.ErrNoProgress
			}
		} else {
			d.empty = 0
		}
	}
}

// lineEnd returns the index in buf of the first CR or LF at or after start,
// or -1. The next LF's position is remembered, so a run of CR-terminated
// lines does not rescan the rest of the buffer for an LF each time: the scan
// stays linear in the input.
func (d *sseDecoder) lineEnd() int {
	if d.lf < d.start {
		if k := bytes.IndexByte(d.buf[d.start:d.end], '\n'); k >= 0 {
			d.lf = d.start + k
		} else {
			d.lf = d.end // no LF in this read
		}
	}
	if k := bytes.IndexByte(d.buf[d.start:d.lf], '\r'); k >= 0 {
		return d.start + k
	}
	if d.lf < d.end {
		return d.lf
	}
	return -1
}

// processLine handles one line; ok reports that it completed an event.
func (d *sseDecoder) processLine(line []byte) (ev []byte, ok bool, err error) {
	if len(line) == 0 {
		if !d.hasData {
			return nil, false, nil
		}
		ev = d.data
		d.data = d.data[:0]
		d.hasData = false
		return ev, true, nil
	}
	if line[0] == ':' {
		return nil, false, nil
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	if string(field) != "data" {
		return nil, false, nil
	}
	n := len(d.data) + len(value)
	if d.hasData {
		n++
	}
	if n > d.max {
		return nil, false, errEventTooLarge{d.max}
	}
	if d.hasData {
		d.data = append(d.data, '\n')
	}
	d.data = append(d.data, value...)
	d.hasData = true
	return nil, false, nil
}
