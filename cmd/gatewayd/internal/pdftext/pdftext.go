// Package pdftext extracts the text a PDF shows, so that a PDF the owner
// posts can be read by the model as plain text (read_attachment) and no
// PDF parser ever runs in brokerd or reaches the model.
//
// It reads what a simple PDF writer makes: content streams, stored plain
// or FlateDecode-compressed, whose text operators (Tj, TJ, ', ") show
// literal or hex strings in a single-byte encoding (or UTF-16BE with a
// byte-order mark). It does not read fonts' ToUnicode maps, object
// streams' compressed dictionaries or images: a PDF made of scanned
// pages, or of CID fonts, gives little or no text, and the caller says
// so to the owner.
//
// Invariants: the input is untrusted; [Text] never panics on any input,
// inflates at most [MaxInflated] bytes in all, returns valid UTF-8 of at
// most max bytes holding no control character but newline and tab, and
// reads nothing but the bytes it is given (a fuzz target holds it).
package pdftext

import (
	"bytes"
	"compress/zlib"
	"errors"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxInflated caps the bytes all of a PDF's streams may inflate to.
const MaxInflated = 32 << 20

// ErrNotPDF is input that does not start as a PDF does.
var ErrNotPDF = errors.New("not a PDF: no %PDF- header")

// Text returns the text pdf's content streams show, at most max bytes
// (cut on a rune boundary), and whether it was cut.
func Text(pdf []byte, max int) (string, bool, error) {
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		return "", false, ErrNotPDF
	}
	out := &sink{max: max}
	budget := MaxInflated
	rest := pdf
	for !out.full {
		i := bytes.Index(rest, []byte("stream"))
		if i < 0 {
			break
		}
		if i >= 3 && string(rest[i-3:i]) == "end" {
			rest = rest[i+6:]
			continue
		}
		dict := dictBefore(rest[:i])
		data := rest[i+6:]
		switch {
		case bytes.HasPrefix(data, []byte("\r\n")):
			data = data[2:]
		case bytes.HasPrefix(data, []byte("\n")), bytes.HasPrefix(data, []byte("\r")):
			data = data[1:]
		default:
			rest = rest[i+6:]
			continue
		}
		end := bytes.Index(data, []byte("endstream"))
		if end < 0 {
			break
		}
		body := data[:end]
		rest = data[end+9:]
		if skip(dict) {
			continue
		}
		if bytes.Contains(dict, []byte("/FlateDecode")) {
			inflated, n := inflate(body, budget)
			budget -= n
			body = inflated
		} else if bytes.Contains(dict, []byte("/Filter")) {
			continue // another filter: not read
		}
		show(body, out)
		if budget <= 0 {
			break
		}
	}
	return strings.TrimSpace(out.b.String()), out.full, nil
}

// dictBefore is the stream's dictionary: what follows the last "obj"
// before the stream keyword.
func dictBefore(b []byte) []byte {
	if i := bytes.LastIndex(b, []byte("obj")); i >= 0 {
		return b[i:]
	}
	if len(b) > 512 {
		return b[len(b)-512:]
	}
	return b
}

// skip reports whether a stream is not page content: an image, a font
// file, or metadata.
func skip(dict []byte) bool {
	for _, k := range []string{"/Image", "/FontFile", "/Length1", "/Metadata", "/XRef", "/ObjStm", "/DCTDecode", "/JPXDecode"} {
		if bytes.Contains(dict, []byte(k)) {
			return true
		}
	}
	return false
}

// inflate decompresses b, at most budget bytes; a broken stream gives
// what came out before the break.
func inflate(b []byte, budget int) ([]byte, int) {
	if budget <= 0 {
		return nil, 0
	}
	r, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, 0
	}
	defer r.Close()
	out, _ := io.ReadAll(io.LimitReader(r, int64(budget)))
	return out, len(out)
}

// sink collects text up to max bytes.
type sink struct {
	b    strings.Builder
	max  int
	full bool
	last rune
}

func (s *sink) write(t string) {
	for _, r := range t {
		if r == '\n' && (s.last == '\n' || s.last == 0) {
			continue // no blank lines, none leading
		}
		if r == utf8.RuneError || (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			continue
		}
		if s.b.Len()+utf8.RuneLen(r) > s.max {
			s.full = true
			return
		}
		s.b.WriteRune(r)
		s.last = r
	}
}

// show runs a content stream's text operators into out.
func show(c []byte, out *sink) {
	var operands []string // the strings since the last operator
	inArray := false
	var array []string
	for i := 0; i < len(c) && !out.full; {
		ch := c[i]
		switch {
		case isSpace(ch):
			i++
		case ch == '%':
			for i < len(c) && c[i] != '\n' && c[i] != '\r' {
				i++
			}
		case ch == '(':
			s, n := literal(c[i:])
			i += n
			if inArray {
				array = append(array, s)
			} else {
				operands = append(operands, s)
			}
		case ch == '<' && i+1 < len(c) && c[i+1] == '<':
			i += 2
		case ch == '>' && i+1 < len(c) && c[i+1] == '>':
			i += 2
		case ch == '<':
			s, n := hexString(c[i:])
			i += n
			if inArray {
				array = append(array, s)
			} else {
				operands = append(operands, s)
			}
		case ch == '[':
			inArray, array = true, nil
			i++
		case ch == ']':
			inArray = false
			operands = append(operands, strings.Join(array, ""))
			i++
		case ch == '-' && inArray:
			// A large negative kerning in a TJ array is a word gap.
			j := i + 1
			for j < len(c) && (c[j] >= '0' && c[j] <= '9' || c[j] == '.') {
				j++
			}
			if j-i > 3 {
				array = append(array, " ")
			}
			i = j
		case isRegular(ch):
			j := i
			for j < len(c) && isRegular(c[j]) {
				j++
			}
			op := string(c[i:j])
			i = j
			switch op {
			case "Tj", "TJ":
				if len(operands) > 0 {
					out.write(operands[len(operands)-1])
				}
			case "'", "\"":
				out.write("\n")
				if len(operands) > 0 {
					out.write(operands[len(operands)-1])
				}
			case "T*", "Td", "TD", "ET":
				out.write("\n")
			}
			if !isNumber(op) && op[0] != '/' {
				operands = operands[:0]
			}
		default:
			i++
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}

// isRegular is a byte of a name, number or operator (not white space
// and not a delimiter, PDF 32000-1 7.2.2).
func isRegular(c byte) bool {
	return !isSpace(c) && !strings.ContainsRune("()<>[]{}%", rune(c))
}

func isNumber(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+') {
			return false
		}
	}
	return true
}

// literal reads a literal string at c[0] == '(' (PDF 32000-1 7.3.4.2):
// balanced parentheses, backslash escapes, octal codes. It returns the
// decoded text and the bytes consumed.
func literal(c []byte) (string, int) {
	var b []byte
	depth := 0
	i := 0
	for ; i < len(c); i++ {
		ch := c[i]
		switch {
		case ch == '(':
			depth++
			if depth == 1 {
				continue
			}
		case ch == ')':
			depth--
			if depth == 0 {
				return decode(b), i + 1
			}
		case ch == '\\' && i+1 < len(c):
			i++
			switch e := c[i]; e {
			case 'n':
				ch = '\n'
			case 'r':
				ch = '\r'
			case 't':
				ch = '\t'
			case 'b', 'f':
				continue
			case '\r', '\n':
				if e == '\r' && i+1 < len(c) && c[i+1] == '\n' {
					i++
				}
				continue
			default:
				if e >= '0' && e <= '7' {
					v := 0
					for k := 0; k < 3 && i < len(c) && c[i] >= '0' && c[i] <= '7'; k++ {
						v = v*8 + int(c[i]-'0')
						i++
					}
					i--
					ch = byte(v)
				} else {
					ch = e
				}
			}
		}
		b = append(b, ch)
	}
	return decode(b), i
}

// hexString reads <hex> at c[0] == '<'.
func hexString(c []byte) (string, int) {
	end := bytes.IndexByte(c, '>')
	if end < 0 {
		return "", len(c)
	}
	var b []byte
	var hi, n int
	for _, ch := range c[1:end] {
		v := unhex(ch)
		if v < 0 {
			continue
		}
		if n%2 == 0 {
			hi = v
		} else {
			b = append(b, byte(hi<<4|v))
		}
		n++
	}
	if n%2 == 1 {
		b = append(b, byte(hi<<4))
	}
	return decode(b), end + 1
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// decode reads a string's bytes: UTF-16BE after a byte-order mark,
// otherwise one byte a character, read as Latin-1 (PDFDocEncoding and
// WinAnsiEncoding agree with it on letters).
func decode(b []byte) string {
	if len(b) >= 2 && b[0] == 0xfe && b[1] == 0xff {
		u := make([]uint16, 0, len(b)/2)
		for i := 2; i+1 < len(b); i += 2 {
			u = append(u, uint16(b[i])<<8|uint16(b[i+1]))
		}
		return string(utf16.Decode(u))
	}
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}
