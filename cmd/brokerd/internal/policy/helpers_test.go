package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var (
	private = Session{Taint: dataclass.Private}
	secret  = Session{Taint: dataclass.Secret}
)

// g writes one [[grant]] table from key = value pairs (values are TOML).
func g(id, tool, mode string, kv ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[[grant]]\nid = %q\ntool = %q\nmode = %q\n", id, tool, mode)
	hasTaint := false
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "%s = %s\n", kv[i], kv[i+1])
		hasTaint = hasTaint || kv[i] == "max_taint"
	}
	if !hasTaint {
		b.WriteString("max_taint = \"secret\"\n")
	}
	return b.String()
}

// set parses grant tables into a valid set.
func set(t *testing.T, tables ...string) *grant.Set {
	t.Helper()
	if len(tables) == 0 {
		s, _ := grant.NewSet()
		return s
	}
	gs, ps := grant.ParseFile("test.toml", []byte(strings.Join(tables, "\n")))
	if len(ps) > 0 {
		t.Fatalf("grants: %v", ps)
	}
	s, err := grant.NewSet(gs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func req(tool string, args any) Request {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return Request{Tool: tool, Arguments: b}
}

func raw(tool, args string) Request { return Request{Tool: tool, Arguments: json.RawMessage(args)} }

func read(p string) Request  { return req("read_file", map[string]string{"path": p}) }
func write(p string) Request { return req("write_file", map[string]string{"path": p, "content": "x"}) }
func shell(dir string) Request {
	return req("shell", map[string]string{"command": "ls", "workdir": dir})
}
func fetch(u string) Request { return req("http_fetch", map[string]string{"url": u}) }
func via(r Request) Request {
	return req("call_tool", map[string]any{"name": r.Tool, "arguments": r.Arguments})
}
func paths(ps ...string) string { return toml(ps) }
func hosts(hs ...string) string { return toml(hs) }
func toml(list []string) string { b, _ := json.Marshal(list); return string(b) }
func outcome(d Decision, a *Ask, n *Denial) string {
	switch {
	case n != nil:
		return "deny:" + string(n.Reason)
	case a != nil:
		return "ask:" + a.Grant.ID
	case d.Valid():
		return "auto:" + d.Grant().ID
	}
	return "nothing"
}

// decide runs Decide and checks that exactly one result is set.
func decide(t *testing.T, gs *grant.Set, r Request, s Session) (Decision, *Ask, *Denial) {
	t.Helper()
	d, a, n := Decide(gs, r, s, now)
	count := 0
	for _, set := range []bool{d.Valid(), a != nil, n != nil} {
		if set {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("Decide(%s %s) set %d results: %v %v %v", r.Tool, r.Arguments, count, d.Valid(), a, n)
	}
	return d, a, n
}
