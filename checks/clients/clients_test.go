package clients

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestShape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, ``},
		{`{"b":1,"a":"x","c":[true,null,2,3]}`, `{"a":string,"b":number,"c":[bool|null|number]}`},
		{`[]`, `[]`},
		{`{"p":{"k":{}}}`, `{"p":{"k":{}}}`},
	} {
		if got := Shape([]byte(tc.in)); got != tc.want {
			t.Errorf("Shape(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// Values never matter; keys and types always do.
	if Shape([]byte(`{"a":"x"}`)) != Shape([]byte(`{"a":"y"}`)) || Shape([]byte(`{"a":"1"}`)) == Shape([]byte(`{"a":1}`)) || Shape([]byte(`{"a":1}`)) == Shape([]byte(`{"b":1}`)) {
		t.Error("Shape compares values, or misses a type or key change")
	}
	if got := QueryShape("since=12&collapsedThreads=false&x=y"); got != "collapsedThreads=bool&since=number&x=string" {
		t.Errorf("QueryShape = %s", got)
	}
	d := Defaults{"collapsedThreads": "false"}
	if got := d.Without("since=1&collapsedThreads=false"); got != "since=1" {
		t.Errorf("Without at the default = %s", got)
	}
	if got := d.Without("since=1&collapsedThreads=true"); !strings.Contains(got, "collapsedThreads=true") {
		t.Errorf("Without dropped a non-default value: %s", got)
	}
}

// recorder is a testing.TB that keeps failures instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) Logf(string, ...any) {}

// TestCheckTypesFails proves the type check can fail: a post missing a
// field, a channel of an unknown type, a number where a string goes.
func TestCheckTypesFails(t *testing.T) {
	Modules(t)
	prelude := `import type {Channel} from '@mattermost/types/channels';
type C = Pick<Channel, 'id' | 'type'>;`
	checks := []TypeCheck{{Label: "good", Type: "C", Value: json.RawMessage(`{"id":"x","type":"D","extra":1}`)}}
	for i, bad := range []string{`{"id":"x"}`, `{"id":"x","type":"X"}`, `{"id":1,"type":"D"}`} {
		checks = append(checks, TypeCheck{Label: fmt.Sprintf("bad%d", i), Type: "C", Value: json.RawMessage(bad)})
	}
	r := &recorder{TB: t}
	CheckTypes(r, prelude, checks)
	report := strings.Join(r.errs, "\n")
	if len(r.errs) != 1 || strings.Contains(report, "[good]") {
		t.Fatalf("errors %v, want one report that does not name the good check", r.errs)
	}
	for i := range 3 {
		if !strings.Contains(report, fmt.Sprintf("[bad%d]", i)) {
			t.Errorf("the report does not name bad%d:\n%s", i, report)
		}
	}
}

// skipper is a testing.TB that records Skipf and Fatalf without ending
// the test.
type skipper struct {
	testing.TB
	skipped, fatal string
}

func (s *skipper) Skipf(format string, a ...any)  { s.skipped = fmt.Sprintf(format, a...) }
func (s *skipper) Fatalf(format string, a ...any) { s.fatal = fmt.Sprintf(format, a...) }

// TestModulesMissing: without node a suite skips with one line, and
// under CI it fails instead.
func TestModulesMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	s := &skipper{TB: t}
	Modules(s)
	if s.skipped == "" || s.fatal != "" || strings.Contains(s.skipped, "\n") {
		t.Errorf("without CI: skipped %q, fatal %q; want one skip line", s.skipped, s.fatal)
	}
	t.Setenv("CI", "true")
	s = &skipper{TB: t}
	Modules(s)
	if s.fatal == "" || s.skipped != "" {
		t.Errorf("with CI: skipped %q, fatal %q; want a failure", s.skipped, s.fatal)
	}
}
