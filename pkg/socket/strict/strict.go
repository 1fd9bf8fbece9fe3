// Package strict is the one JSON decoder for every frame on a socket and
// every JSON record read back from disk.
//
// Invariant: [Unmarshal] fills v only when the input is exactly one JSON
// value that a Go struct of v's type could have written. It refuses
//
//   - keys that no field declares (unknown fields);
//   - keys whose case differs from the declared name (encoding/json would
//     silently match "Outcome" to a field tagged "outcome");
//   - duplicate keys, at any depth, including inside raw values;
//   - a missing field whose tag has no omitempty (absence is not a zero);
//   - null for anything but a pointer, an interface or a raw value;
//   - fractional or exponent numbers, or out-of-range ones, where an
//     integer is declared, and any float field at all (the wire has none);
//   - trailing data after the value, and input that is not valid UTF-8.
//
// Only after the whole input has passed these checks is encoding/json used
// to fill v, so a refused input never leaves v half-written.
//
// Errors name the field by its JSON path (for example grant.max_taint or
// calls[2].id) so that an owner reading a refusal knows where to look.
//
// [Marshal] is the matching encoder: no HTML escaping, no trailing newline,
// fields in declaration order, so that a golden file re-encodes to itself.
package strict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Error is a refusal, naming where in the input it happened.
type Error struct {
	Path   string // JSON path of the offending value; empty for the top level
	Reason string

	kind error // a sentinel the refusal matches with errors.Is, if any
}

// Unwrap returns the sentinel this refusal matches, such as
// [ErrUnknownType], or nil.
func (e *Error) Unwrap() error { return e.kind }

func (e *Error) Error() string {
	if e.Path == "" {
		return "strict decode: " + e.Reason
	}
	return "strict decode: " + e.Path + ": " + e.Reason
}

// Unmarshal decodes data into v (a non-nil pointer) under the rules in the
// package doc. On error v is unchanged.
func Unmarshal(data []byte, v any) error {
	return unmarshal(data, v, "")
}

func unmarshal(data []byte, v any, tagKey string) error {
	rv := reflectPointer(v)
	if rv == nil {
		return &Error{Reason: fmt.Sprintf("cannot decode into %T: need a non-nil pointer", v)}
	}
	if !utf8.Valid(data) {
		return &Error{Reason: "input is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec, tagKey: tagKey}
	if err := w.value(rv.Elem().Type(), ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Reason: "trailing data after the value"}
	}
	if err := json.Unmarshal(data, v); err != nil {
		// The walk accepts only what encoding/json can fill; reaching
		// here means the two disagree, which must never pass silently.
		return &Error{Reason: "decode: " + err.Error()}
	}
	return nil
}

// Marshal encodes v as compact JSON without HTML escaping and without a
// trailing newline. Characters such as '<' and '&' stay as they are, so
// that text the model wrote is stored and replayed byte for byte.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("strict encode: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// errSyntax wraps a token error from encoding/json into a path error.
func errSyntax(path string, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &Error{Path: path, Reason: fmt.Sprintf("syntax error at byte %d: %v", se.Offset, se)}
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Path: path, Reason: "unexpected end of input"}
	}
	return &Error{Path: path, Reason: err.Error()}
}
