package tools

import (
	"strings"
	"testing"
	"time"
)

func TestCoreIsFixed(t *testing.T) {
	var names []string
	for _, tl := range Core() {
		names = append(names, tl.Function.Name)
	}
	if got := strings.Join(names, ","); got != "clock,find_tool,call_tool,recall,memory" {
		t.Errorf("core tools = %s", got)
	}
}

func TestFind(t *testing.T) {
	for _, tt := range []struct{ args, want, not string }{
		{`{"query":"read a file"}`, `"name":"read_file"`, ""},
		{`{"query":"fetch url"}`, `"name":"http_fetch"`, `"name":"shell"`},
		{`{"query":""}`, `"name":"shell"`, ""},
		{`{"query":"zzz"}`, `"name":"shell"`, ""},
	} {
		got, err := Find(tt.args)
		if err != nil || !strings.Contains(got, tt.want) || (tt.not != "" && strings.Contains(got, tt.not)) {
			t.Errorf("Find(%s) = %s, %v", tt.args, got, err)
		}
	}
	for _, bad := range []string{`{}`, `{"Query":"x"}`, `{"query":1}`, `not json`} {
		if _, err := Find(bad); err == nil {
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
