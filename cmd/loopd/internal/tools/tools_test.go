package tools

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

func TestCoreIsFixed(t *testing.T) {
	for ask, want := range map[bool]string{false: "clock,find_tool,call_tool,recall,memory", true: "clock,find_tool,call_tool,recall,memory,ask_memory"} {
		var names []string
		for _, tl := range Core(ask) {
			names = append(names, tl.Function.Name)
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("core tools (ask_memory %v) = %s, want %s", ask, got, want)
		}
	}
}

func TestFind(t *testing.T) {
	for _, tt := range []struct{ args, want, not string }{
		{`{"query":"read a file"}`, `"name":"read_file"`, ""},
		{`{"query":"fetch url"}`, `"name":"http_fetch"`, `"name":"shell"`},
		{`{"query":""}`, `"name":"shell"`, ""},
		{`{"query":"zzz"}`, `"name":"shell"`, ""},
	} {
		got, err := Find(tt.args, nil)
		if err != nil || !strings.Contains(got, tt.want) || (tt.not != "" && strings.Contains(got, tt.not)) {
			t.Errorf("Find(%s) = %s, %v", tt.args, got, err)
		}
	}
	for _, bad := range []string{`{}`, `{"Query":"x"}`, `{"query":1}`, `not json`} {
		if _, err := Find(bad, nil); err == nil {
			t.Errorf("Find(%s) succeeded", bad)
		}
	}
}

func TestParseCall(t *testing.T) {
	if c, err := ParseCall(`{"name":"read_file","arguments":{"path":"/x"}}`); err != nil || c.Name != "read_file" || string(c.Arguments) != `{"path":"/x"}` {
		t.Errorf("ParseCall = %+v, %v", c, err)
	}
	for _, bad := range []string{
		`{"name":"rm_rf","arguments":{}}`,
		`{"name":"call_tool","arguments":{}}`,
		`{"name":"read_file","arguments":"x"}`,
		`{"name":"read_file","arguments":null}`,
		`{"name":"read_file"}`,
		`{"name":"read_file","arguments":{},"extra":1}`,
	} {
		if _, err := ParseCall(bad); err == nil {
			t.Errorf("ParseCall(%s) succeeded", bad)
		}
	}
}

func TestClock(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 5, 0, 0, time.UTC)
	if got, err := Now(`{}`, at); err != nil || got != "Monday 2026-11-30 09:05:00 +0000 UTC" {
		t.Errorf("Now = %q, %v", got, err)
	}
	if _, err := Now(`{"tz":"x"}`, at); err == nil {
		t.Error("clock accepted an argument it does not take")
	}
}

func TestMemoryCall(t *testing.T) {
	if a, err := MemoryCall("recall", `{"query":"tea"}`); err != nil || a.Name != "recall" || string(a.Arguments) != `{"query":"tea"}` {
		t.Errorf("MemoryCall = %+v, %v", a, err)
	}
	for _, bad := range []string{`["x"]`, `null`, `"x"`, `{`} {
		if _, err := MemoryCall("memory", bad); err == nil {
			t.Errorf("MemoryCall(%s) = nil", bad)
		}
	}
}

// TestSpecsCoverToolset: every tool the model may be offered, in the
// array (ask_memory when configured) or through the catalog, has a
// description, and no description names a tool that is not offered.
func TestSpecsCoverToolset(t *testing.T) {
	offered := append(append(toolset.Core(), toolset.AskMemory), toolset.Of(toolset.ClassGranted)...)
	slices.Sort(offered)
	if got := slices.Sorted(maps.Keys(specs)); !slices.Equal(got, offered) {
		t.Errorf("specs describe %q; toolset offers %q", got, offered)
	}
	var names []string
	for _, e := range Catalog {
		names = append(names, e.Name)
	}
	if want := toolset.Of(toolset.ClassGranted); !slices.Equal(names, want) {
		t.Errorf("catalog = %q, want toolset's granted tools %q", names, want)
	}
}

// TestCatalogSchemas: each granted tool's schema names exactly the keys
// its argument type writes and requires them all (toolargs requires every
// field), so a call that follows the schema is one brokerd can parse.
func TestCatalogSchemas(t *testing.T) {
	for _, a := range []toolargs.Args{toolargs.ReadFile{}, toolargs.WriteFile{}, toolargs.Shell{}, toolargs.HTTPFetch{}} {
		raw, err := a.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var wire map[string]json.RawMessage
		if err := json.Unmarshal(raw, &wire); err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(specs[a.Tool()].parameters, &schema); err != nil {
			t.Fatalf("%s: schema: %v", a.Tool(), err)
		}
		want := slices.Sorted(maps.Keys(wire))
		if got := slices.Sorted(maps.Keys(schema.Properties)); !slices.Equal(got, want) {
			t.Errorf("%s: schema properties %q, arguments %q", a.Tool(), got, want)
		}
		if got := slices.Sorted(slices.Values(schema.Required)); !slices.Equal(got, want) {
			t.Errorf("%s: schema requires %q, toolargs requires %q", a.Tool(), got, want)
		}
	}
}

// TestToBroker: call_tool and the offered memory tools go to brokerd; a
// memory tool the model was not offered (ask_memory without the config's
// ask_memory) and the local tools do not.
func TestToBroker(t *testing.T) {
	for ask, askWant := range map[bool]bool{false: false, true: true} {
		for name, want := range map[string]bool{"call_tool": true, "recall": true, "memory": true, "ask_memory": askWant, "clock": false, "find_tool": false, "read_file": false, "grep": false} {
			if got := ToBroker(name, Core(ask)); got != want {
				t.Errorf("ToBroker(%q) with ask_memory %v = %v, want %v", name, ask, got, want)
			}
		}
	}
}

// TestFindConsult: consult is found by what it does and called through
// call_tool; it is not in the fixed tools array.
func TestFindConsult(t *testing.T) {
	out, err := Find(`{"query":"second opinion"}`, nil)
	if err != nil || !strings.Contains(out, `"name":"consult"`) {
		t.Errorf("Find(second opinion) = %s, %v", out, err)
	}
	if _, err := ParseCall(`{"name":"consult","arguments":{"question":"q"}}`); err != nil {
		t.Errorf("ParseCall(consult) = %v", err)
	}
	for _, c := range Core(true) {
		if c.Function.Name == "consult" {
			t.Error("consult is in the tools array")
		}
	}
}

// TestMemorySchemas: each memory tool's schema declares exactly the keys
// of its arguments in package toolargs (memoryd's one parser of them) and
// requires exactly those the parser requires, so a call that follows the
// schema is one memoryd can parse.
func TestMemorySchemas(t *testing.T) {
	for _, name := range []string{toolset.Recall, toolset.Memory, toolset.AskMemory} {
		all, required, ok := toolargs.MemoryKeys(name)
		if !ok {
			t.Fatalf("toolargs has no arguments for %s", name)
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(specs[name].parameters, &schema); err != nil {
			t.Fatalf("%s: schema: %v", name, err)
		}
		if got := slices.Sorted(maps.Keys(schema.Properties)); !slices.Equal(got, slices.Sorted(slices.Values(all))) {
			t.Errorf("%s: schema properties %q, arguments %q", name, got, all)
		}
		if got := slices.Sorted(slices.Values(schema.Required)); !slices.Equal(got, slices.Sorted(slices.Values(required))) {
			t.Errorf("%s: schema requires %q, toolargs requires %q", name, got, required)
		}
	}
}
