package strict

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

var (
	rawType         = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walker checks one JSON value against a Go type, token by token.
type walker struct {
	dec *json.Decoder
	// tagKey, when set, is a key the top-level object must carry and that
	// no field declares: the discriminator of a tagged union.
	tagKey string
}

func reflectPointer(v any) *reflect.Value {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil
	}
	return &rv
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// value consumes one JSON value that must fit type t.
func (w *walker) value(t reflect.Type, path string) error {
	// A type that decodes itself is checked only for well-formed JSON
	// and duplicate keys here; its UnmarshalJSON must be strict itself
	// (the tagged unions in this repository call [Union.Decode]).
	if t == rawType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return w.any(path)
	}
	tok, err := w.dec.Token()
	if err != nil {
		return errSyntax(path, err)
	}
	if tok == nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Interface:
			return nil
		}
		return &Error{Path: path, Reason: "null is not allowed here"}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
		if t == rawType || reflect.PointerTo(t).Implements(unmarshalerType) {
			return &Error{Path: path, Reason: "pointer to a self-decoding type is not supported"}
		}
	}
	if reflect.PointerTo(t).Implements(textType) {
		if _, ok := tok.(string); !ok {
			return &Error{Path: path, Reason: fmt.Sprintf("want a string, got %s", describe(tok))}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		return w.rest(tok, path)
	case reflect.Struct:
		return w.object(tok, t, path)
	case reflect.Map:
		return w.mapping(tok, t, path)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return want[string](tok, path, "a base64 string")
		}
		return w.array(tok, t, path)
	case reflect.Array:
		return w.array(tok, t, path)
	case reflect.String:
		return want[string](tok, path, "a string")
	case reflect.Bool:
		return want[bool](tok, path, "a boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return integer(tok, path, t.Bits(), true)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return integer(tok, path, t.Bits(), false)
	case reflect.Float32, reflect.Float64:
		return &Error{Path: path, Reason: "float fields are not allowed on the wire"}
	}
	return &Error{Path: path, Reason: fmt.Sprintf("unsupported Go type %s", t)}
}

func want[T any](tok json.Token, path, what string) error {
	if _, ok := tok.(T); !ok {
		return &Error{Path: path, Reason: fmt.Sprintf("want %s, got %s", what, describe(tok))}
	}
	return nil
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

func integer(tok json.Token, path string, bits int, signed bool) error {
	n, ok := tok.(json.Number)
	if !ok {
		return &Error{Path: path, Reason: fmt.Sprintf("want an integer, got %s", describe(tok))}
	}
	s := string(n)
	if strings.ContainsAny(s, ".eE") {
		return &Error{Path: path, Reason: fmt.Sprintf("want an integer, got %s (fraction or exponent)", s)}
	}
	var err error
	if signed {
		_, err = strconv.ParseInt(s, 10, bits)
	} else {
		_, err = strconv.ParseUint(s, 10, bits)
	}
	if err != nil {
		return &Error{Path: path, Reason: fmt.Sprintf("integer %s out of range", s)}
	}
	return nil
}

// object checks a JSON object against struct type t.
func (w *walker) object(tok json.Token, t reflect.Type, path string) error {
	if tok != json.Delim('{') {
		return &Error{Path: path, Reason: fmt.Sprintf("want an object, got %s", describe(tok))}
	}
	fs, err := fieldsOf(t)
	if err != nil {
		return &Error{Path: path, Reason: err.Error()}
	}
	tagKey := ""
	if path == "" {
		tagKey, w.tagKey = w.tagKey, ""
	}
	seen := make(map[string]bool, len(fs.byName))
	for w.dec.More() {
		k, err := w.key(path, seen)
		if err != nil {
			return err
		}
		if tagKey != "" && k == tagKey {
			if err := w.tag(join(path, k)); err != nil {
				return err
			}
			continue
		}
		f, ok := fs.byName[k]
		if !ok {
			for name := range fs.byName {
				if strings.EqualFold(name, k) {
					return &Error{Path: join(path, k), Reason: fmt.Sprintf("key case differs from the declared field %q", name)}
				}
			}
			return &Error{Path: join(path, k), Reason: "unknown field"}
		}
		if err := w.value(f.typ, join(path, k)); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil {
		return errSyntax(path, err)
	}
	if tagKey != "" && !seen[tagKey] {
		return &Error{Path: join(path, tagKey), Reason: "missing type tag"}
	}
	for _, name := range fs.required {
		if !seen[name] {
			return &Error{Path: join(path, name), Reason: "missing field"}
		}
	}
	return nil
}

// tag consumes the discriminator's value, which Union has already read.
func (w *walker) tag(path string) error {
	tok, err := w.dec.Token()
	if err != nil {
		return errSyntax(path, err)
	}
	return want[string](tok, path, "a string")
}

// key reads one object key and refuses a repeat of it.
func (w *walker) key(path string, seen map[string]bool) (string, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return "", errSyntax(path, err)
	}
	k := tok.(string) // json.Decoder yields only strings in key position
	if seen[k] {
		return "", &Error{Path: join(path, k), Reason: "duplicate key"}
	}
	seen[k] = true
	return k, nil
}

func (w *walker) mapping(tok json.Token, t reflect.Type, path string) error {
	if tok != json.Delim('{') {
		return &Error{Path: path, Reason: fmt.Sprintf("want an object, got %s", describe(tok))}
	}
	if t.Key().Kind() != reflect.String {
		return &Error{Path: path, Reason: fmt.Sprintf("unsupported map key type %s", t.Key())}
	}
	seen := map[string]bool{}
	for w.dec.More() {
		k, err := w.key(path, seen)
		if err != nil {
			return err
		}
		if err := w.value(t.Elem(), join(path, k)); err != nil {
			return err
		}
	}
	_, err := w.dec.Token()
	return errOrNil(path, err)
}

func (w *walker) array(tok json.Token, t reflect.Type, path string) error {
	if tok != json.Delim('[') {
		return &Error{Path: path, Reason: fmt.Sprintf("want an array, got %s", describe(tok))}
	}
	n := 0
	for w.dec.More() {
		if t.Kind() == reflect.Array && n >= t.Len() {
			return &Error{Path: path, Reason: fmt.Sprintf("more than %d elements", t.Len())}
		}
		if err := w.value(t.Elem(), fmt.Sprintf("%s[%d]", path, n)); err != nil {
			return err
		}
		n++
	}
	if t.Kind() == reflect.Array && n != t.Len() {
		return &Error{Path: path, Reason: fmt.Sprintf("want %d elements, got %d", t.Len(), n)}
	}
	_, err := w.dec.Token()
	return errOrNil(path, err)
}

// any consumes one value of any shape, refusing duplicate keys in it.
func (w *walker) any(path string) error {
	tok, err := w.dec.Token()
	if err != nil {
		return errSyntax(path, err)
	}
	return w.rest(tok, path)
}

func (w *walker) rest(tok json.Token, path string) error {
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for w.dec.More() {
			k, err := w.key(path, seen)
			if err != nil {
				return err
			}
			if err := w.any(join(path, k)); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for n := 0; w.dec.More(); n++ {
			if err := w.any(fmt.Sprintf("%s[%d]", path, n)); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err := w.dec.Token()
	return errOrNil(path, err)
}

func errOrNil(path string, err error) error {
	if err != nil {
		return errSyntax(path, err)
	}
	return nil
}

type field struct {
	typ reflect.Type
}

type fields struct {
	byName   map[string]field
	order    []string // every name, in declaration order
	required []string
}

var fieldCache sync.Map // reflect.Type -> fieldsOrErr

type fieldsOrErr struct {
	f   *fields
	err error
}

// fieldsOf lists the JSON names a struct declares, as encoding/json would
// write them. An untagged embedded struct (not a pointer) contributes its
// fields at its place, as encoding/json flattens it; a name declared twice
// (by two embedded structs, or by one and the outer struct) is refused,
// where encoding/json would let the shallower win or drop both, so that the
// walk and encoding/json can never disagree about a name. The ",string"
// option and every other kind of embedding are refused.
func fieldsOf(t reflect.Type) (*fields, error) {
	if c, ok := fieldCache.Load(t); ok {
		fe := c.(fieldsOrErr)
		return fe.f, fe.err
	}
	fs := &fields{byName: map[string]field{}}
	add := func(name string, f field, required bool) error {
		if _, dup := fs.byName[name]; dup {
			return fmt.Errorf("%s declares the JSON name %q twice", t, name)
		}
		fs.byName[name] = f
		fs.order = append(fs.order, name)
		if required {
			fs.required = append(fs.required, name)
		}
		return nil
	}
	var err error
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		if sf.Anonymous {
			if tag != "" || sf.Type.Kind() != reflect.Struct {
				err = fmt.Errorf("embedded field %s in %s is not supported (only an untagged struct, not a pointer)", sf.Name, t)
				break
			}
			sub, serr := fieldsOf(sf.Type)
			if serr != nil {
				err = serr
				break
			}
			for _, name := range sub.order {
				if err = add(name, sub.byName[name], slices.Contains(sub.required, name)); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		if strings.Contains(","+opts+",", ",string,") {
			err = fmt.Errorf("field %s in %s uses the ,string option", sf.Name, t)
			break
		}
		required := !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,")
		if err = add(name, field{typ: sf.Type}, required); err != nil {
			break
		}
	}
	fieldCache.Store(t, fieldsOrErr{fs, err})
	return fs, err
}
