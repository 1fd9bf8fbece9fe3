package grant

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// The strict loader (package config) decides whether a file is accepted;
// what follows only explains a refusal grant by grant, so that each
// message names the grant it is about. If it finds nothing to say, the
// loader's own message is used.

// keyKinds is the type of every key a [[grant]] table may hold.
var keyKinds = map[string]string{
	"id": "string", "tool": "string", "max_taint": "string", "result_class": "string",
	"expires": "string", "mode": "string", "secret": "string",
	"writable": "bool", "untrusted": "bool",
	"paths": "strings", "hosts": "strings",
}

// refused are keys the brief names but that grants may not set yet.
var refused = map[string]string{
	"patterns": "patterns are not allowed: matching commands or arguments by pattern is a false comfort, and the container is the boundary",
}

// locate decodes data loosely and lists, per grant, the keys and values
// the strict loader refuses.
func locate(name string, data []byte) []Problem {
	var top map[string]any
	if _, err := toml.Decode(string(data), &top); err != nil {
		return nil // a syntax error: the loader's message has the line
	}
	var ps []Problem
	for _, k := range sortedKeys(top) {
		if k == "grant" {
			continue
		}
		reason := fmt.Sprintf("unknown key %q; a grant file holds only [[grant]] tables", k)
		if strings.EqualFold(k, "grant") {
			reason = fmt.Sprintf("key %q: case differs from the declared key \"grant\"", k)
		}
		ps = append(ps, Problem{File: name, Reason: reason})
	}
	raw, ok := top["grant"]
	if !ok {
		return ps
	}
	tables, ok := raw.([]map[string]any)
	if !ok {
		return append(ps, Problem{File: name, Reason: "grant must be an array of tables, written [[grant]]"})
	}
	for i, m := range tables {
		id, _ := m["id"].(string)
		for _, k := range sortedKeys(m) {
			if reason := keyProblem(k, m[k]); reason != "" {
				ps = append(ps, Problem{File: name, Grant: label(id, i), Reason: reason})
			}
		}
	}
	return ps
}

func keyProblem(k string, v any) string {
	if r, ok := refused[k]; ok {
		return r
	}
	kind, ok := keyKinds[k]
	if !ok {
		for known := range keyKinds {
			if strings.EqualFold(known, k) {
				return fmt.Sprintf("key %q: case differs from the declared key %q", k, known)
			}
		}
		for r := range refused {
			if strings.EqualFold(r, k) {
				return refused[r]
			}
		}
		return fmt.Sprintf("unknown key %q", k)
	}
	switch kind {
	case "string":
		if _, ok := v.(string); ok {
			return ""
		}
		if k == "expires" && isTime(v) {
			return "expires must be a quoted RFC 3339 string, such as \"2027-01-01T00:00:00Z\", not a TOML date"
		}
		return fmt.Sprintf("%s must be a string, not %s", k, typeName(v))
	case "bool":
		if _, ok := v.(bool); !ok {
			return fmt.Sprintf("%s must be true or false, not %s", k, typeName(v))
		}
	case "strings":
		list, ok := v.([]any)
		if !ok {
			return fmt.Sprintf("%s must be an array of strings, not %s", k, typeName(v))
		}
		for _, e := range list {
			if _, ok := e.(string); !ok {
				return fmt.Sprintf("%s must be an array of strings; it holds %s", k, typeName(e))
			}
		}
	}
	return ""
}

func isTime(v any) bool {
	_, ok := v.(time.Time) // local dates and times decode as time.Time too
	return ok
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	if isTime(v) {
		return "a date"
	}
	return fmt.Sprintf("%T", v)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

var lineRE = regexp.MustCompile(`line (\d+)`)

// errLine is the line number a loader error names, or 0.
func errLine(err error) int {
	m := lineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

var (
	headerRE = regexp.MustCompile(`^\s*\[\[\s*grant\s*\]\]`)
	idRE     = regexp.MustCompile(`^\s*id\s*=\s*"([^"]*)"`)
)

// grantAtLine names the grant whose table holds line (1-based), by its id
// if a plain `id = "..."` line gives it, else by its place; "" if line is
// before the first table or unknown. It reads text, not TOML, because it
// is used only when the file does not parse.
func grantAtLine(data []byte, line int) string {
	if line <= 0 {
		return ""
	}
	lines := strings.Split(string(data), "\n")
	idx, start := -1, -1
	for i := 0; i < len(lines) && i < line; i++ {
		if headerRE.MatchString(lines[i]) {
			idx, start = idx+1, i
		}
	}
	if idx < 0 {
		return ""
	}
	for i := start + 1; i < len(lines) && !headerRE.MatchString(lines[i]); i++ {
		if m := idRE.FindStringSubmatch(lines[i]); m != nil {
			return label(m[1], idx)
		}
	}
	return label("", idx)
}
