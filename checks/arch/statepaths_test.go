package arch

import (
	"reflect"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// tops are the layout table's top-level names (sessions, broker, run...).
func tops() []string {
	var out []string
	for _, e := range layout.Table {
		if first, _, _ := strings.Cut(e.Path, "/"); first != "." {
			out = append(out, first)
		}
	}
	return out
}

// TestRepoStatePaths (issue 25: no state path, socket path or peer uid
// list spelled outside the layout table; the keys still in the configs
// are LayoutKeys, each with its reason).
func TestRepoStatePaths(t *testing.T) {
	if len(tops()) < 10 {
		t.Fatalf("the layout table has %d top-level names; the rule would pass vacuously", len(tops()))
	}
	report(t, StatePaths(root, tops()))
	// Every listed key is still read: a key that left its config leaves
	// the list too.
	got := map[string]bool{}
	for role, typ := range roleConfigs {
		for _, k := range keysOf(typ) {
			got[role+"."+k] = true
		}
	}
	for k := range LayoutKeys {
		if !got[k] {
			t.Errorf("LayoutKeys lists %s, which no role's config has: drop it from the list", k)
		}
	}
}

// TestPlantedStatePaths: a state path joined by hand, a file named
// beside an entry's path, an epoch file spelled with its format and a new
// socket key in a role's config are each caught; the same in a test, in
// package layout and under checks/ are not.
func TestPlantedStatePaths(t *testing.T) {
	dir := plant(t, map[string]string{
		"cmd/memoryd/internal/memd/memd.go": "package memd\n\nimport (\n\t\"fmt\"\n\t\"path/filepath\"\n\n\t\"example.com/m/pkg/host/layout\"\n)\n\n" +
			"func a(s string) string { return filepath.Join(s, \"index\", \"recall.db\") }\n\n" +
			"func b(s string) string { return filepath.Join(layout.LoopState.In(s), \"jobs.json\") }\n\n" +
			"func c(d string, n int) string { return filepath.Join(d, fmt.Sprintf(\"%d.jsonl\", n)) }\n\n" +
			"func d(s string) string { return filepath.Join(s, \"tmp\", \"x\") }\n",
		"cmd/memoryd/internal/memd/memd_test.go": "package memd\n\nimport \"path/filepath\"\n\nfunc e(s string) string { return filepath.Join(s, \"index\") }\n",
		"pkg/host/layout/paths.go":               "package layout\n\nimport \"path/filepath\"\n\nfunc R(s string) string { return filepath.Join(s, \"index\", \"recall.db\") }\n",
		"checks/stack/stack.go":                  "package stack\n\nimport \"path/filepath\"\n\nfunc f(s string) string { return filepath.Join(s, \"sessions\") }\n",
		"pkg/host/roleconf/loopd/config.go":      "package loopd\n\ntype Config struct {\n\tStateDir string `toml:\"state_dir\"`\n\tJobsSocket string `toml:\"jobs_socket\"`\n\tName string `toml:\"name\"`\n\tGIDs []uint32 `toml:\"allow_gids\"`\n\tPlaced string `toml:\"-\"`\n}\n",
		"pkg/host/roleconf/gatewayd/config.go":   "package gatewayd\n\ntype Config struct {\n\tChat string `toml:\"memory_chat_socket\"`\n}\n",
	})
	got := StatePaths(dir, []string{"index", "sessions", "loop"})
	expect(t, got, `cmd/memoryd/internal/memd/memd.go:10: spells the state path "index"`)
	expect(t, got, `cmd/memoryd/internal/memd/memd.go:12: spells the state path "jobs.json"`)
	expect(t, got, `cmd/memoryd/internal/memd/memd.go:14: spells a session's epoch file ("%d.jsonl")`)
	expect(t, got, "pkg/host/roleconf/loopd/config.go:3: config key loopd.jobs_socket names what the layout table decides")
	expect(t, got, "pkg/host/roleconf/loopd/config.go:3: config key loopd.state_dir names what the layout table decides")
	expect(t, got, "pkg/host/roleconf/gatewayd/config.go:3: config key gatewayd.memory_chat_socket names what the layout table decides")
	if len(got) != 6 {
		t.Errorf("want exactly the six planted spellings (recall.db follows index on the same call but only the top is judged; allow_gids is listed; a field with no key is no key), got:\n%s", strings.Join(got, "\n"))
	}
}

// keysOf is every TOML key a config type declares, its tables' included.
func keysOf(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("toml"), ","); name != "" && name != "-" {
			out = append(out, name)
			out = append(out, keysOf(f.Type)...)
		}
	}
	return out
}
