package llama

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// maxChunkDepth bounds the nesting decodeChunk follows; a chunk nests four
// deep (tool call function), unknown fields may add some.
const maxChunkDepth = 32

// jscan is a cursor over JSON text. Every method returns false when the
// text is not what it can decode exactly; the cursor is then meaningless.
type jscan struct {
	b     []byte
	i     int
	depth int
}

func (p *jscan) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// eat consumes c after white space.
func (p *jscan) eat(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// null consumes a null literal if one is next.
func (p *jscan) null() bool {
	p.ws()
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// once marks bit in seen; a field seen twice gives up (encoding/json
// would merge or overwrite, depending on the type).
func (p *jscan) once(seen *uint16, bit uint16) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// object reads an object, calling field with each key (plain ASCII,
// without escapes) to read its value.
func (p *jscan) object(field func(key []byte) bool) bool {
	if !p.eat('{') {
		return false
	}
	if p.depth++; p.depth > maxChunkDepth {
		return false
	}
	if p.eat('}') {
		p.depth--
		return true
	}
	for {
		p.ws()
		key, ok := p.rawString()
		if !ok || hasEscapeOrNonASCII(key) || !p.eat(':') || !field(key) {
			return false
		}
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			p.depth--
			return true
		}
		return false
	}
}

// unknown skips the value of a key that is not one of names. A key that
// equals one of them when ASCII case is folded would be matched by
// encoding/json: give up.
func (p *jscan) unknown(key []byte, names ...string) bool {
	for _, n := range names {
		if len(n) == len(key) && asciiEqualFold(key, n) {
			return false
		}
	}
	return p.skip()
}

func asciiEqualFold(b []byte, s string) bool {
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func hasEscapeOrNonASCII(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// rawString reads a string at the cursor and returns its bytes between the
// quotes, escapes undecoded. A control character gives up (invalid JSON).
func (p *jscan) rawString() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return p.b[start:j], true
		case c == '\\':
			j++ // the escaped byte; validated where it is decoded
		case c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// str reads a string or null into dst. Plain text is copied (or reuses
// prev when equal); escapes and invalid UTF-8 are left to encoding/json's
// own string decoding, so they decode exactly as it decodes them.
func (p *jscan) str(dst *string, prev string) bool {
	if p.null() {
		return true
	}
	start := p.i
	raw, ok := p.rawString()
	if !ok {
		return false
	}
	plain := true
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	switch {
	case plain && string(raw) == prev:
		*dst = prev
	case plain || (!hasEscape(raw) && utf8.Valid(raw)):
		*dst = string(raw)
	default:
		return json.Unmarshal(p.b[start:p.i], dst) == nil
	}
	return true
}

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// number reads a JSON number and returns its text; integer reports that it
// has no fraction or exponent.
func (p *jscan) number() (text []byte, integer, ok bool) {
	p.ws()
	start, b := p.i, p.b
	i := start
	digits := func() bool {
		n := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return nil, false, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return nil, false, false
		}
		integer = false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false, false
		}
		integer = false
	}
	p.i = i
	return b[start:i], integer, true
}

// int64 reads an integer or null into dst. A fraction, an exponent or more
// than 18 digits gives up (encoding/json refuses the first two for an
// integer field and range-checks the third).
func (p *jscan) int64(dst *int64) bool {
	if p.null() {
		return true
	}
	text, integer, ok := p.number()
	if !ok || !integer || len(text) > 18 {
		return false
	}
	neg := text[0] == '-'
	if neg {
		text = text[1:]
	}
	var n int64
	for _, c := range text {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	*dst = n
	return true
}

func (p *jscan) int(dst *int) bool {
	v := int64(*dst)
	if !p.int64(&v) {
		return false
	}
	*dst = int(v)
	return true
}

// float reads a number or null into dst with strconv.ParseFloat, as
// encoding/json does; out of range gives up.
func (p *jscan) float(dst *float64) bool {
	if p.null() {
		return true
	}
	text, _, ok := p.number()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return false
	}
	*dst = f
	return true
}

// literal consumes s.
func (p *jscan) literal(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// skip validates and skips any value.
func (p *jscan) skip() bool {
	p.ws()
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		raw, ok := p.rawString()
		return ok && validEscapes(raw)
	case c == '{':
		return p.object(func(key []byte) bool { return p.skip() })
	case c == '[':
		return p.array(p.skip)
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	}
	_, _, ok := p.number()
	return ok
}

// validEscapes reports whether every escape in a raw string is one JSON
// allows.
func validEscapes(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if i+5 > len(raw) {
				return false
			}
			for _, h := range raw[i+1 : i+5] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return false
				}
			}
			i += 4
		default:
			return false
		}
	}
	return true
}

// array reads an array, calling elem for each element.
func (p *jscan) array(elem func() bool) bool {
	if !p.eat('[') {
		return false
	}
	if p.depth++; p.depth > maxChunkDepth {
		return false
	}
	if p.eat(']') {
		p.depth--
		return true
	}
	for {
		if !elem() {
			return false
		}
		if p.eat(',') {
			continue
		}
		if p.eat(']') {
			p.depth--
			return true
		}
		return false
	}
}
