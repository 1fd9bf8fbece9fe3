// Package config is the strict loader for the TOML files Boxmaker reads:
// each role's config, and the owner's grant files, MCP server
// declarations and job files. [Load] reads a config only if package
// ownership's rule holds for it. One file is decoded elsewhere:
// config/users.toml, by package layout into its table's own type, also
// refusing unknown keys (checks/arch's Decoders lists it and the others).
// A role's loader ([Checked]) takes every path the layout table decides
// from the state directory ([Placed]), never from the file.
//
// Invariant: [Decode] fills v only from a file in which every key is one
// that v's type declares, spelled exactly as declared (BurntSushi/toml
// would otherwise match keys case-insensitively), with values of the
// declared types. Duplicate keys and type mismatches are refused by the
// TOML parser itself; undecoded keys and case mismatches are refused here;
// float fields are refused, as on the wire, because every quantity in
// Boxmaker is a whole number (durations are in milliseconds). An error
// names the file and the key, and v is untouched on error.
package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
)

// MaxSize caps a config or grant file; nothing the owner writes by hand
// comes close.
const MaxSize = 1 << 20

// Load reads and decodes the TOML file at path into v (a pointer). The
// file, each link's target and every directory on its path must be owned
// by root or by this process's uid and writable by no one else
// ([ownership.Self]): a config shapes what a daemon trusts, and a daemon
// cannot yet know any other owner when it reads its own config.
func Load(path string, v any) error {
	data, err := read(path)
	if err != nil {
		return err
	}
	return Decode(data, path, v)
}

// read reads path under [ownership.Self]'s rule.
func read(path string) ([]byte, error) {
	data, err := ownership.Self().ReadFile(path, MaxSize)
	if err != nil {
		var ue *ownership.UnsafeError
		if errors.As(err, &ue) {
			return nil, fmt.Errorf("config %s: %s: only root and this daemon's user may write a config or a directory above it; see docs/runbook.md#owner-file-unsafe", path, ue.Explain())
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	return data, nil
}

// retired refuses a text that sets one of keys (top-level) by name,
// with why it is no longer read. A text that does not parse is left to
// [Decode], which names the line.
func retired(data []byte, name string, keys map[string]string) error {
	if len(keys) == 0 {
		return nil
	}
	top, ok := topLevel(data)
	if !ok {
		return nil
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if _, ok := top[k]; ok {
			return fmt.Errorf("config %s: key %s is no longer read; delete its line: %s", name, k, keys[k])
		}
	}
	return nil
}

// topLevel is the text's keys and values without a schema; false if it
// does not parse ([Decode] then names the line).
func topLevel(data []byte) (map[string]any, bool) {
	var top map[string]any
	if _, err := toml.Decode(string(data), &top); err != nil {
		return nil, false
	}
	return top, true
}

// Decode decodes TOML text into v (a pointer); name labels errors.
func Decode(data []byte, name string, v any) error { return decode(data, name, v, nil) }

// decode is [Decode] that passes over the top-level keys in skip (keys
// [Checked] has already judged).
func decode(data []byte, name string, v any, skip map[string]bool) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("config %s: need a non-nil pointer, got %T", name, v)
	}
	if err := noFloats(rv.Type().Elem(), ""); err != nil {
		return fmt.Errorf("config %s: %w", name, err)
	}
	// Decode into a fresh value so that v is untouched on error.
	fresh := reflect.New(rv.Type().Elem())
	md, err := toml.Decode(string(data), fresh.Interface())
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("config %s: line %d: %s", name, pe.Position.Line, pe.Message)
		}
		return fmt.Errorf("config %s: %w", name, err)
	}
	var unknown []string
	for _, k := range md.Undecoded() {
		if !skip[k[0]] {
			unknown = append(unknown, k.String())
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("config %s: unknown key %s", name, strings.Join(unknown, ", "))
	}
	for _, k := range md.Keys() {
		if skip[k[0]] {
			continue
		}
		if err := exactKey(rv.Type().Elem(), k); err != nil {
			return fmt.Errorf("config %s: key %s: %w", name, k, err)
		}
	}
	rv.Elem().Set(fresh.Elem())
	return nil
}

// tomlName is the key BurntSushi/toml writes for a struct field.
func tomlName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("toml")
	if tag == "-" || !f.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, true
}

// exactKey checks that every part of a decoded key names a field exactly.
func exactKey(t reflect.Type, key toml.Key) error {
	for _, part := range key {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map:
			t = t.Elem()
			continue
		case reflect.Struct:
		default:
			// A scalar or text value has no sub-keys; toml has
			// already reported any mismatch in its type.
			return nil
		}
		found := false
		for j := range t.NumField() {
			f := t.Field(j)
			name, ok := tomlName(f)
			if !ok {
				continue
			}
			if name == part {
				t, found = f.Type, true
				break
			}
			if strings.EqualFold(name, part) {
				return fmt.Errorf("case differs from the declared key %q", name)
			}
		}
		if !found {
			return errors.New("unknown key")
		}
	}
	return nil
}

// noFloats refuses a target type with a float anywhere in it.
func noFloats(t reflect.Type, path string) error {
	return walkType(t, path, map[reflect.Type]bool{})
}

func walkType(t reflect.Type, path string, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return fmt.Errorf("field %s is a float; use an integer", path)
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return walkType(t.Elem(), path, seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if name, ok := tomlName(f); ok {
				if err := walkType(f.Type, strings.TrimPrefix(path+"."+name, "."), seen); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
