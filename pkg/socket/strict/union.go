package strict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// ErrUnknownType is matched (errors.Is) by [Union.Decode]'s refusal of a
// tag that is not one of the union's cases: a caller can tell a message
// of another protocol from a malformed one.
var ErrUnknownType = errors.New("unknown type")

// Variant is one case of a tagged union: a pointer to a struct that knows
// its own tag. The struct must not declare the tag key as a field.
type Variant interface {
	Tag() string
}

// Union decodes and encodes a tagged union, {"<Key>":"<tag>", ...fields},
// with one strict decoder per tag. Build it once at package init with
// [NewUnion]; it is safe for concurrent use afterwards.
type Union[V Variant] struct {
	key  string
	news map[string]func() V
}

// NewUnion returns a union keyed by key whose cases are made by news. It
// panics if two cases share a tag or a case declares a field that could be
// confused with the key: both are programming errors, found at init.
func NewUnion[V Variant](key string, news ...func() V) *Union[V] {
	u := &Union[V]{key: key, news: map[string]func() V{}}
	for _, mk := range news {
		v := mk()
		tag := v.Tag()
		if _, dup := u.news[tag]; dup {
			panic(fmt.Sprintf("strict: union %q: duplicate tag %q", key, tag))
		}
		t := reflect.TypeOf(v)
		if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
			panic(fmt.Sprintf("strict: union %q: case %q is %s, want a pointer to a struct", key, tag, t))
		}
		fs, err := fieldsOf(t.Elem())
		if err != nil {
			panic(fmt.Sprintf("strict: union %q: case %q: %v", key, tag, err))
		}
		for name := range fs.byName {
			if strings.EqualFold(name, key) {
				panic(fmt.Sprintf("strict: union %q: case %q declares field %q", key, tag, name))
			}
		}
		u.news[tag] = mk
	}
	return u
}

// Tags lists the union's tags, for tests that want a golden file per case.
func (u *Union[V]) Tags() []string {
	tags := make([]string, 0, len(u.news))
	for t := range u.news {
		tags = append(tags, t)
	}
	return tags
}

// New returns a zero value of the case named tag, or false.
func (u *Union[V]) New(tag string) (V, bool) {
	mk, ok := u.news[tag]
	if !ok {
		var zero V
		return zero, false
	}
	return mk(), true
}

// Decode reads the tag, then decodes the whole object strictly into that
// case. An unknown or missing tag is refused like an unknown field.
func (u *Union[V]) Decode(data []byte) (V, error) {
	var zero V
	tag, err := u.peekTag(data)
	if err != nil {
		return zero, err
	}
	mk, ok := u.news[tag]
	if !ok {
		return zero, &Error{Path: u.key, Reason: fmt.Sprintf("unknown type %q", tag), kind: ErrUnknownType}
	}
	v := mk()
	if err := unmarshal(data, v, u.key); err != nil {
		return zero, err
	}
	return v, nil
}

// peekTag finds the tag's value in a top-level object without judging the
// rest; the full strict walk follows in Decode.
func (u *Union[V]) peekTag(data []byte) (string, error) {
	if !utf8.Valid(data) {
		return "", &Error{Reason: "input is not valid UTF-8"}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return "", &Error{Reason: "want an object with a " + u.key + " tag"}
	}
	raw, ok := top[u.key]
	if !ok {
		return "", &Error{Path: u.key, Reason: "missing type tag"}
	}
	var tag string
	if err := json.Unmarshal(raw, &tag); err != nil {
		return "", &Error{Path: u.key, Reason: "type tag is not a string"}
	}
	return tag, nil
}

// Encode writes {"<key>":"<tag>", ...fields of v}, the tag first.
func (u *Union[V]) Encode(v V) ([]byte, error) {
	if _, ok := u.news[v.Tag()]; !ok {
		return nil, fmt.Errorf("strict encode: tag %q is not a case of union %q", v.Tag(), u.key)
	}
	body, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	head, err := Marshal(map[string]string{u.key: v.Tag()})
	if err != nil {
		return nil, err
	}
	head = bytes.TrimSuffix(head, []byte("}"))
	if string(body) == "{}" {
		return append(head, '}'), nil
	}
	return append(append(head, ','), body[1:]...), nil
}
