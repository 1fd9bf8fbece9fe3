package policy

import (
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

// TestRules has one case per rule in the package doc and per decision-log
// row about policy; want is "auto:<grant>", "ask:<grant>" or
// "deny:<reason>".
func TestRules(t *testing.T) {
	home := g("home", "read_file", "auto", "paths", paths("/home/o"))
	tests := []struct {
		name   string
		grants []string
		req    Request
		sess   Session
		want   string
	}{
		// No matching grant means deny.
		{"no grants", nil, read("/home/o/a"), private, "deny:no_grant"},
		{"other tool's grant", []string{home}, write("/home/o/a"), private, "deny:no_grant"},
		{"outside the path", []string{home}, read("/etc/passwd"), private, "deny:no_grant"},
		{"inside the path", []string{home}, read("/home/o/a/b.md"), private, "auto:home"},
		{"the path itself", []string{home}, read("/home/o"), private, "auto:home"},
		// Path matching is by whole elements, on clean paths only.
		{"sibling prefix", []string{home}, read("/home/ob"), private, "deny:no_grant"},
		{"dotdot escape", []string{home}, read("/home/o/../../etc/passwd"), private, "deny:invalid_arguments"},
		{"dot element", []string{home}, read("/home/o/./a"), private, "deny:invalid_arguments"},
		{"double slash", []string{home}, read("/home//o/a"), private, "deny:invalid_arguments"},
		{"trailing slash", []string{home}, read("/home/o/"), private, "deny:invalid_arguments"},
		{"relative", []string{home}, read("home/o/a"), private, "deny:invalid_arguments"},
		{"colon", []string{home}, read("/home/o/a:b"), private, "deny:invalid_arguments"},
		// The most restrictive mode wins.
		{"auto and ask", []string{home, g("ask", "read_file", "ask", "paths", paths("/home"))}, read("/home/o/a"), private, "ask:ask"},
		{"auto and deny", []string{home, g("no", "read_file", "deny", "paths", paths("/home/o/a"))}, read("/home/o/a"), private, "deny:denied_by_grant"},
		{"ask and deny", []string{g("ask", "read_file", "ask", "paths", paths("/home/o/a")), g("no", "read_file", "deny", "paths", paths("/home"))}, read("/home/o/a"), private, "deny:denied_by_grant"},
		{"deny elsewhere", []string{home, g("no", "read_file", "deny", "paths", paths("/home/o/secret"))}, read("/home/o/a"), private, "auto:home"},
		// Within a mode the longest matched path wins, then the id.
		{"longest path", []string{g("a", "read_file", "auto", "paths", paths("/home")), g("z", "read_file", "auto", "paths", paths("/home/o"))}, read("/home/o/x"), private, "auto:z"},
		{"longest of several paths", []string{g("a", "read_file", "auto", "paths", paths("/srv", "/home/o/x")), g("b", "read_file", "auto", "paths", paths("/home/o"))}, read("/home/o/x/y"), private, "auto:a"},
		{"id tie-break", []string{g("b", "read_file", "ask", "paths", paths("/home/o")), g("a", "read_file", "ask", "paths", paths("/home/o"))}, read("/home/o/x"), private, "ask:a"},
		{"length does not beat mode", []string{g("long", "read_file", "auto", "paths", paths("/home/o/x")), g("short", "read_file", "ask", "paths", paths("/home"))}, read("/home/o/x"), private, "ask:short"},
		// A grant applies only at session taint <= its max_taint.
		{"taint under max", []string{g("p", "read_file", "auto", "paths", paths("/d"), "max_taint", `"private"`)}, read("/d/x"), private, "auto:p"},
		{"taint above max", []string{g("p", "read_file", "auto", "paths", paths("/d"), "max_taint", `"private"`)}, read("/d/x"), secret, "deny:no_grant"},
		{"public session is private", []string{g("p", "read_file", "auto", "paths", paths("/d"), "max_taint", `"private"`)}, read("/d/x"), Session{Taint: dataclass.Public}, "auto:p"},
		{"unreadable session is secret", []string{g("p", "read_file", "auto", "paths", paths("/d"), "max_taint", `"private"`)}, read("/d/x"), Session{}, "deny:no_grant"},
		{"deny holds at secret", []string{home, g("no", "read_file", "deny", "paths", paths("/home/o"))}, read("/home/o/a"), secret, "deny:denied_by_grant"},
		// Expired grants never match, deny grants included.
		{"expires later", []string{g("e", "read_file", "auto", "paths", paths("/d"), "expires", `"2026-11-30T12:00:01Z"`)}, read("/d/x"), private, "auto:e"},
		{"expires now", []string{g("e", "read_file", "auto", "paths", paths("/d"), "expires", `"2026-11-30T12:00:00Z"`)}, read("/d/x"), private, "deny:no_grant"},
		{"expired deny", []string{g("a", "read_file", "auto", "paths", paths("/d")), g("no", "read_file", "deny", "paths", paths("/d"), "expires", `"2026-01-01T00:00:00Z"`)}, read("/d/x"), private, "auto:a"},
		// write_file: a grant path equal to the argument does not count.
		{"write inside", []string{g("w", "write_file", "auto", "paths", paths("/home/o/drafts"))}, write("/home/o/drafts/a.md"), private, "auto:w"},
		{"write the grant path", []string{g("w", "write_file", "auto", "paths", paths("/home/o/drafts"))}, write("/home/o/drafts"), private, "deny:no_grant"},
		{"write a file grant", []string{g("w", "write_file", "ask", "paths", paths("/home/o/a.md"))}, write("/home/o/a.md"), private, "deny:no_grant"},
		{"equal path falls to shorter", []string{g("w", "write_file", "auto", "paths", paths("/home/o")), g("f", "write_file", "ask", "paths", paths("/home/o/a.md"))}, write("/home/o/a.md"), private, "auto:w"},
		{"deny on the file itself", []string{g("w", "write_file", "auto", "paths", paths("/home/o")), g("no", "write_file", "deny", "paths", paths("/home/o/a.md"))}, write("/home/o/a.md"), private, "deny:denied_by_grant"},
		{"read the grant path", []string{g("r", "read_file", "auto", "paths", paths("/home/o/a.md"))}, read("/home/o/a.md"), private, "auto:r"},
		// http_fetch: exact host names.
		{"host", []string{g("f", "http_fetch", "ask", "hosts", hosts("example.com"))}, fetch("https://example.com/x"), private, "ask:f"},
		{"host any case", []string{g("f", "http_fetch", "ask", "hosts", hosts("example.com"))}, fetch("https://EXAMPLE.com/x"), private, "ask:f"},
		{"subdomain", []string{g("f", "http_fetch", "ask", "hosts", hosts("example.com"))}, fetch("https://www.example.com/"), private, "deny:no_grant"},
		{"suffix trick", []string{g("f", "http_fetch", "ask", "hosts", hosts("example.com"))}, fetch("https://example.com.evil.org/"), private, "deny:no_grant"},
		{"ip literal", []string{g("f", "http_fetch", "auto", "hosts", hosts("example.com"))}, fetch("http://127.1/"), private, "deny:invalid_arguments"},
		{"userinfo trick", []string{g("f", "http_fetch", "auto", "hosts", hosts("example.com"))}, fetch("https://example.com@evil.org/"), private, "deny:invalid_arguments"},
		{"port", []string{g("f", "http_fetch", "auto", "hosts", hosts("example.com"))}, fetch("https://example.com:22/"), private, "deny:invalid_arguments"},
		// shell: covered workdirs, and grants the mount would expose.
		{"shell covered", []string{g("s", "shell", "ask", "paths", paths("/src"))}, shell("/src/p"), private, "ask:s"},
		{"shell above the grant", []string{g("s", "shell", "auto", "paths", paths("/src/p"))}, shell("/src"), private, "deny:no_grant"},
		{"shell exposes a deny", []string{g("s", "shell", "auto", "paths", paths("/home/o")), g("no", "shell", "deny", "paths", paths("/home/o/.ssh"))}, shell("/home/o"), private, "deny:denied_by_grant"},
		{"shell exposes an ask", []string{g("s", "shell", "auto", "paths", paths("/home/o")), g("k", "shell", "ask", "paths", paths("/home/o/keys"))}, shell("/home/o"), private, "ask:s"}, // k exposed: it asks, s covers and wins
		{"shell beside a deny", []string{g("s", "shell", "auto", "paths", paths("/home/o")), g("no", "shell", "deny", "paths", paths("/home/o/.ssh"))}, shell("/home/o/src"), private, "auto:s"},
		// Tools grants cannot name.
		{"unknown tool", []string{home}, raw("exec", `{}`), private, "deny:unknown_tool"},
		{"empty tool", []string{home}, raw("", `{}`), private, "deny:unknown_tool"},
		{"find_tool", []string{home}, raw("find_tool", `{"query":"x"}`), private, "deny:unknown_tool"},
		// call_tool is never the tool decided.
		{"call_tool target", []string{home}, via(read("/home/o/a")), private, "auto:home"},
		{"call_tool target denied", []string{home}, via(read("/etc/x")), private, "deny:no_grant"},
		{"call_tool itself", []string{home}, via(raw("call_tool", `{"name":"read_file","arguments":{"path":"/home/o/a"}}`)), private, "deny:invalid_arguments"},
		{"call_tool no name", []string{home}, raw("call_tool", `{"name":"","arguments":{}}`), private, "deny:invalid_arguments"},
		{"call_tool string arguments", []string{home}, raw("call_tool", `{"name":"read_file","arguments":"{\"path\":\"/home/o/a\"}"}`), private, "deny:invalid_arguments"},
		{"call_tool extra key", []string{home}, raw("call_tool", `{"name":"read_file","arguments":{"path":"/home/o/a"},"x":1}`), private, "deny:invalid_arguments"},
		// Strict arguments.
		{"unknown argument", []string{home}, raw("read_file", `{"path":"/home/o/a","follow":true}`), private, "deny:invalid_arguments"},
		{"duplicate argument", []string{home}, raw("read_file", `{"path":"/etc/x","path":"/home/o/a"}`), private, "deny:invalid_arguments"},
		{"case argument", []string{home}, raw("read_file", `{"Path":"/home/o/a"}`), private, "deny:invalid_arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs := set(t, tt.grants...)
			if got := outcome(decide(t, gs, tt.req, tt.sess)); got != tt.want {
				t.Errorf("Decide(%s %s) = %s, want %s", tt.req.Tool, tt.req.Arguments, got, tt.want)
			}
		})
	}
}

func TestMemoryToolsAreBuiltIn(t *testing.T) {
	for _, gs := range []*grant.Set{nil, {}, set(t)} {
		for _, r := range []Request{raw("recall", `{"query":"x","k":3}`), raw("ask_memory", `{"q":"x"}`), raw("memory", `{"op":"note"}`), via(raw("recall", `{"query":"x"}`))} {
			d, _, _ := decide(t, gs, r, Session{})
			if !d.Valid() || !d.Builtin() || d.Mode() != grant.Auto || d.Class() != dataclass.Private || d.Untrusted() {
				t.Errorf("Decide(%s) = %+v, want a built-in auto Decision", r.Tool, d.Record())
			}
			if d.Record().Mode != "builtin" || d.Record().Grant != nil {
				t.Errorf("record = %+v", d.Record())
			}
		}
		if _, _, n := decide(t, gs, raw("recall", `[]`), private); n == nil || n.Reason != InvalidArguments {
			t.Errorf("recall with an array = %v", n)
		}
	}
}

func TestGrantsInvalidDeniesEverything(t *testing.T) {
	for _, gs := range []*grant.Set{nil, {}} {
		for _, r := range []Request{read("/home/o/a"), via(write("/x/y")), raw("shell", `{"nonsense":1}`), raw("exec", `{}`)} {
			_, _, n := decide(t, gs, r, private)
			if n == nil || n.Reason != GrantsInvalid || !strings.Contains(n.Error(), "see docs/runbook.md#grants-invalid") {
				t.Fatalf("Decide(%s) with invalid grants = %v", r.Tool, n)
			}
			if rec := n.Record(); rec.Outcome != "denied" || rec.Reason != GrantsInvalid {
				t.Errorf("record = %+v; every request gets a decision record", rec)
			}
		}
	}
}

// TestLabelsCombine: a result's class and untrusted flag come from every
// applicable grant, not from the winner (decision log 2026-09-18: with
// overlapping auto grants the id tie-break chose the label, so a secret
// could come back private).
func TestLabelsCombine(t *testing.T) {
	gs := set(t,
		g("a", "read_file", "auto", "paths", paths("/d"), "result_class", `"private"`, "untrusted", "false"),
		g("b", "read_file", "auto", "paths", paths("/d/s"), "result_class", `"secret"`, "untrusted", "false"),
		g("c", "read_file", "auto", "paths", paths("/d/s/u"), "result_class", `"public"`),
		g("k", "read_file", "ask", "paths", paths("/d/k"), "result_class", `"public"`),
	)
	tests := []struct {
		path      string
		want      string
		class     dataclass.Class
		untrusted bool
	}{
		{"/d/x", "auto:a", dataclass.Private, false},
		{"/d/s/x", "auto:b", dataclass.Secret, false},
		{"/d/s/u/x", "auto:c", dataclass.Secret, true},
		{"/d/k/x", "ask:k", dataclass.Private, true},
	}
	for _, tt := range tests {
		d, a, n := decide(t, gs, read(tt.path), private)
		if got := outcome(d, a, n); got != tt.want {
			t.Fatalf("Decide(%s) = %s, want %s", tt.path, got, tt.want)
		}
		class, untrusted := d.Class(), d.Untrusted()
		if a != nil {
			class, untrusted = a.Class, a.Untrusted
		}
		if class != tt.class || untrusted != tt.untrusted {
			t.Errorf("Decide(%s) labels %v untrusted=%v, want %v untrusted=%v", tt.path, class, untrusted, tt.class, tt.untrusted)
		}
	}
	// Exposure counts for shell: a secret grant inside the workdir.
	sh := set(t, g("s", "shell", "auto", "paths", paths("/h"), "result_class", `"private"`, "untrusted", "false", "writable", "true"),
		g("v", "shell", "auto", "paths", paths("/h/vault"), "result_class", `"secret"`, "untrusted", "false"))
	d, _, _ := decide(t, sh, shell("/h"), private)
	if d.Class() != dataclass.Secret || d.Grant().ID != "s" || len(d.Mounts()) != 1 || d.Mounts()[0].Writable {
		t.Errorf("shell over a secret grant: %+v", d.Record())
	}
	if d, _, _ := decide(t, sh, shell("/h/src"), private); d.Class() != dataclass.Private || !d.Mounts()[0].Writable {
		t.Errorf("shell beside it: %+v", d.Record())
	}
}

func TestWhatADecisionGrants(t *testing.T) {
	gs := set(t, g("r", "read_file", "auto", "paths", paths("/h")), g("w", "write_file", "auto", "paths", paths("/h/out")),
		g("s", "shell", "auto", "paths", paths("/src")), g("f", "http_fetch", "auto", "hosts", hosts("example.com", "other.org")))
	tests := []struct {
		req    Request
		mount  string
		rw     bool
		host   string
		target string
	}{
		{read("/h/a.md"), "/h/a.md", false, "", "/h/a.md"},
		{write("/h/out/sub/a.md"), "/h/out/sub", true, "", "/h/out/sub/a.md"},
		{shell("/src/p"), "/src/p", false, "", "/src/p"},
		{fetch("https://Example.com/a?b"), "", false, "example.com", "https://Example.com/a?b"},
	}
	for _, tt := range tests {
		d, _, n := decide(t, gs, tt.req, private)
		if n != nil {
			t.Fatalf("%s: %v", tt.req.Tool, n)
		}
		ms, hs := d.Mounts(), d.Hosts()
		switch {
		case tt.mount != "" && (len(ms) != 1 || ms[0].Path.String() != tt.mount || ms[0].Writable != tt.rw || len(hs) != 0):
			t.Errorf("%s: mounts %v hosts %v, want %s rw=%v", tt.req.Tool, ms, hs, tt.mount, tt.rw)
		case tt.host != "" && (len(hs) != 1 || hs[0].String() != tt.host || len(ms) != 0):
			t.Errorf("%s: hosts %v mounts %v, want only %s", tt.req.Tool, hs, ms, tt.host)
		}
		if d.Tool() != tt.req.Tool || d.Args().Tool() != tt.req.Tool || d.Record().Target != tt.target || d.At() != now {
			t.Errorf("%s: tool %q args %v target %q", tt.req.Tool, d.Tool(), d.Args(), d.Record().Target)
		}
	}
}

// TestSecretIsTheWinners: a call gets the winning grant's secret and no
// other; the Ask shows it to the owner and the record names it.
func TestSecretIsTheWinners(t *testing.T) {
	gs := set(t, g("gh", "shell", "auto", "paths", paths("/src/gh"), "secret", `"GITHUB_TOKEN"`),
		g("plain", "shell", "auto", "paths", paths("/src")),
		g("ask", "shell", "ask", "paths", paths("/ask"), "secret", `"DEPLOY_KEY"`))
	for _, tt := range []struct {
		req          Request
		want, winner string
	}{
		{shell("/src/gh/repo"), "GITHUB_TOKEN", "gh"},
		{shell("/src/other"), "", "plain"},
		// gh only exposes /src/gh through the workdir /src: plain covers
		// the call, so plain wins and gh's secret stays out.
		{shell("/src"), "", "plain"},
	} {
		d, _, n := decide(t, gs, tt.req, private)
		if n != nil {
			t.Fatal(n)
		}
		if d.Secret() != tt.want || d.Record().Secret != tt.want || d.Grant().ID != tt.winner {
			t.Errorf("%s: Secret() = %q, record %q, winner %q; want %q, %q", tt.req.Arguments, d.Secret(), d.Record().Secret, d.Grant().ID, tt.want, tt.winner)
		}
	}
	// An exposed ask grant makes the call an ask, but the covering grant
	// wins and the exposed grant's secret is not given.
	gs2 := set(t, g("key", "shell", "ask", "paths", paths("/w/k"), "secret", `"DEPLOY_KEY"`),
		g("w", "shell", "auto", "paths", paths("/w")))
	if _, a, _ := decide(t, gs2, shell("/w"), private); a == nil || a.Secret != "" || a.Grant.ID != "w" {
		t.Errorf("exposed ask grant: ask = %+v", a)
	}
	_, a, _ := decide(t, gs, shell("/ask/x"), private)
	if a == nil || a.Secret != "DEPLOY_KEY" || a.Record().Secret != "DEPLOY_KEY" {
		t.Fatalf("ask = %+v", a)
	}
	if d, n := Redecide(gs, a.Request, private, now); n != nil || d.Secret() != "DEPLOY_KEY" {
		t.Errorf("Redecide: secret %q, %v", d.Secret(), n)
	}
}

func TestDenialsSayWhy(t *testing.T) {
	gs := set(t, g("old", "read_file", "auto", "paths", paths("/d"), "expires", `"2026-01-01T00:00:00Z"`),
		g("low", "read_file", "auto", "paths", paths("/d"), "max_taint", `"private"`),
		g("no", "read_file", "deny", "paths", paths("/d/n")))
	_, _, n := decide(t, gs, read("/d/x"), secret)
	if n.Reason != NoGrant || n.Expired != 1 || n.AboveTaint != 1 || n.Target != "/d/x" || !strings.Contains(n.Error(), "see docs/runbook.md#no-grant") {
		t.Errorf("no_grant denial = %+v: %v", n, n)
	}
	_, _, n = decide(t, gs, via(read("/d/n/x")), private)
	if n.Reason != DeniedByGrant || n.Grant == nil || n.Grant.ID != "no" || n.Grant.SHA256 == "" || n.Tool != "read_file" || !n.ViaCallTool ||
		!strings.Contains(n.Error(), "see docs/runbook.md#denied-by-grant") {
		t.Errorf("deny denial = %+v: %v", n, n)
	}
	_, _, n = decide(t, gs, raw("read_file", `{"path":"/d/`+strings.Repeat("é\n", 400)+`"}`), private)
	if n.Reason != InvalidArguments || len(n.Detail) > MaxDetail || strings.Contains(n.Detail, "\n") || !strings.Contains(n.Error(), "see docs/runbook.md#invalid-arguments") {
		t.Errorf("invalid arguments detail (%d bytes) = %q", len(n.Detail), n.Detail)
	}
	_, _, n = decide(t, gs, raw("exec", `{}`), private)
	if !strings.Contains(n.Error(), `"exec"`) || !strings.Contains(n.Error(), "see docs/runbook.md#no-grant") {
		t.Errorf("unknown tool: %v", n)
	}
	_, _, n = decide(t, gs, raw("call_tool", `{"name":"exec","arguments":{}}`), private)
	if n.Tool != "exec" || !n.ViaCallTool {
		t.Errorf("a denial names call_tool's target: %+v", n)
	}
}

// TestAskIsNotADecision: Decide never returns a Decision for an ask
// grant; only Redecide does, against the grants and taint of its moment.
func TestAskIsNotADecision(t *testing.T) {
	ask := g("ask", "read_file", "ask", "paths", paths("/d"), "max_taint", `"private"`)
	gs := set(t, ask)
	d, a, _ := decide(t, gs, read("/d/x"), private)
	if d.Valid() || a == nil || a.Tool != "read_file" || a.Grant.ID != "ask" || a.Record().Outcome != "ask" {
		t.Fatalf("Decide = %v, %+v", d.Valid(), a)
	}
	r, n := Redecide(gs, a.Request, private, now.Add(time.Minute))
	if n != nil || !r.Valid() || !r.Approved() || r.Mode() != grant.Ask || r.Grant().ID != "ask" || !r.Record().Approved {
		t.Errorf("Redecide = %+v, %v", r.Record(), n)
	}
	auto := set(t, g("ask", "read_file", "auto", "paths", paths("/d")))
	if r, n := Redecide(auto, a.Request, private, now); n != nil || r.Mode() != grant.Auto || !r.Approved() {
		t.Errorf("Redecide after the grant became auto = %+v, %v", r.Record(), n)
	}
	denied := set(t, ask, g("stop", "read_file", "deny", "paths", paths("/d/x")))
	if r, n := Redecide(denied, a.Request, private, now); r.Valid() || n == nil || n.Reason != DeniedByGrant || n.Grant.ID != "stop" || n.Grant.SHA256 == "" {
		t.Errorf("Redecide after a deny grant was added = %v, %+v", r.Valid(), n)
	}
	if r, n := Redecide(gs, a.Request, secret, now); r.Valid() || n == nil || n.Reason != NoGrant || n.AboveTaint != 1 {
		t.Errorf("Redecide after the taint rose = %v, %+v", r.Valid(), n)
	}
	expiring := set(t, g("ask", "read_file", "ask", "paths", paths("/d"), "expires", `"2026-11-30T12:05:00Z"`))
	if r, n := Redecide(expiring, a.Request, private, now.Add(5*time.Minute)); r.Valid() || n == nil || n.Expired != 1 {
		t.Errorf("Redecide after the grant expired = %v, %+v", r.Valid(), n)
	}
	if r, n := Redecide(nil, a.Request, private, now); r.Valid() || n.Reason != GrantsInvalid {
		t.Errorf("Redecide with invalid grants = %v, %+v", r.Valid(), n)
	}
}

func TestZeroDecision(t *testing.T) {
	var d Decision
	if d.Valid() || d.Tool() != "" || d.Args() != nil || d.Mounts() != nil || d.Hosts() != nil || d.Secret() != "" || d.Class().Valid() || d.Mode().Valid() || d.Approved() {
		t.Error("the zero Decision is valid or carries something")
	}
	if d.Record().Outcome != "invalid" {
		t.Errorf("zero record = %+v", d.Record())
	}
}

func TestDetailIsOneSafeLine(t *testing.T) {
	_, _, n := decide(t, set(t), raw("read_file", `{"path\u202e\u001b[31m":"/x"}`), private)
	if n == nil || n.Reason != InvalidArguments || strings.ContainsAny(n.Detail, "\u202e\u001b") || !strings.Contains(n.Detail, `\u202e`) {
		t.Errorf("detail = %q", n.Detail)
	}
	_, _, n = decide(t, nil, raw("x\ny", `{}`), private)
	if strings.Contains(n.Error(), "\n") {
		t.Errorf("a denial message spans lines: %q", n.Error())
	}
}
