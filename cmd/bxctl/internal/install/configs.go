package install

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// tokenRef is the only token gatewayd's unit can give it.
const tokenRef = "credential:" + units.MattermostToken

// readGatewayConfig reads --gateway-config through package ownership's
// rule (whoever can write it chooses who may talk to the agent) and
// checks, by decoding it, that its top-level token key is the
// credential. gatewayd decodes the file against its whole schema when
// it starts; here every key is decoded (duplicates refused by the
// parser) and only token is judged, so a comment or another key naming
// the credential beside a token in clear is refused.
func readGatewayConfig(path string, owners ownership.Owners) ([]byte, error) {
	b, err := owners.ReadFile(path, config.MaxSize)
	if err != nil {
		if r := unsafeRefusal("--gateway-config "+path, err); r != nil {
			return nil, r
		}
		return nil, fmt.Errorf("install: --gateway-config: %w", err)
	}
	refuse := func(why string) error {
		return Refusal{fmt.Sprintf("%s %s; it must set token = %q: the unit gives gatewayd its token only as that credential", path, why, tokenRef), "see docs/runbook.md#install-token"}
	}
	var m map[string]any
	if _, err := toml.Decode(string(b), &m); err != nil {
		return nil, refuse(fmt.Sprintf("does not parse (%v)", err))
	}
	switch tok, ok := m["token"].(string); {
	case !ok:
		return nil, refuse("has no string key token")
	case tok != tokenRef:
		// The value is not quoted: it may be the token itself.
		return nil, refuse("sets token to something else")
	}
	return b, nil
}

// setKey sets table's key ("" for the top level) to the string value in
// a TOML text the owner may have edited, changing only the one line that
// holds it, and checks by decoding both texts that nothing else changed.
// changed is false when the key holds value already. A key it cannot
// edit in place (absent, a dotted key, an inline table) is refused.
func setKey(name, text, table, key, value string) (out string, changed bool, err error) {
	at := key
	if table != "" {
		at = "[" + table + "] " + key
	}
	refuse := func(why string) error {
		return Refusal{fmt.Sprintf("%s: %s %s; the install sets it to %q (write it as one line `%s = \"...\"`%s)", name, at, why, value, key, inTable(table)), "see docs/runbook.md#install-config-key"}
	}
	var before map[string]any
	if _, err := toml.Decode(text, &before); err != nil {
		return "", false, refuse(fmt.Sprintf("cannot be read: the file does not parse (%v)", err))
	}
	if cur, ok := get(before, table, key); ok && cur == value {
		return text, false, nil
	}
	lines := strings.Split(text, "\n")
	cur, hit := "", -1
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "[["):
			cur = "\x00" // an array of tables holds no key of ours
		case strings.HasPrefix(t, "["):
			cur = strings.TrimSpace(strings.Trim(strings.SplitN(t, "]", 2)[0], "["))
		case cur == table && isKeyLine(t, key):
			if hit >= 0 {
				return "", false, refuse("is on more than one line")
			}
			hit = i
		}
	}
	if hit < 0 {
		return "", false, refuse("is missing or not on a line of its own")
	}
	indent := lines[hit][:len(lines[hit])-len(strings.TrimLeft(lines[hit], " \t"))]
	lines[hit] = fmt.Sprintf("%s%s = %q", indent, key, value)
	out = strings.Join(lines, "\n")
	var after map[string]any
	if _, err := toml.Decode(out, &after); err != nil {
		return "", false, refuse("could not be edited in place")
	}
	set(before, table, key, value)
	if !reflect.DeepEqual(before, after) {
		return "", false, refuse("could not be edited in place")
	}
	return out, true, nil
}

func inTable(table string) string {
	if table == "" {
		return " before any table"
	}
	return " under [" + table + "]"
}

// isKeyLine is whether trimmed line t assigns key (bare, unquoted).
func isKeyLine(t, key string) bool {
	rest, ok := strings.CutPrefix(t, key)
	return ok && strings.HasPrefix(strings.TrimLeft(rest, " \t"), "=")
}

func get(m map[string]any, table, key string) (any, bool) {
	if table != "" {
		t, ok := m[table].(map[string]any)
		if !ok {
			return nil, false
		}
		m = t
	}
	v, ok := m[key]
	return v, ok
}

func set(m map[string]any, table, key string, v any) {
	if table != "" {
		t, ok := m[table].(map[string]any)
		if !ok {
			return
		}
		m = t
	}
	m[key] = v
}

// maxDiff bounds the work of [lineDiff] (lines of one times the other).
const maxDiff = 1 << 20

// lineDiff is the lines only in a ("- ") and only in b ("+ ") in order,
// by their longest common subsequence; a token line's value is shown
// only when it is the credential, never what may be a token in clear.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(x)*len(y) > maxDiff {
		return fmt.Sprintf("  (%d lines against %d: too long to compare here; use diff)\n", len(x), len(y))
	}
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&sb, "  + %s\n", redact(y[j]))
			j++
		default:
			fmt.Fprintf(&sb, "  - %s\n", redact(x[i]))
			i++
		}
	}
	return sb.String()
}

func redact(l string) string {
	if !strings.Contains(l, "token") {
		return l
	}
	var m map[string]any
	if _, err := toml.Decode(l, &m); err == nil && len(m) == 1 && m["token"] == tokenRef {
		return l
	}
	return "(a line naming token, not shown: it may hold the token in clear)"
}
