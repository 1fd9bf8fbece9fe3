package policy

import (
	"errors"
	"testing"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// allowFor makes the allowance an owner's `session` answer to r's ask
// would make (as brokerd does), in session state s.
func allowFor(t *testing.T, tables []string, r Request, s Session, dir bool) Allowed {
	t.Helper()
	_, ask, den := Decide(set(t, tables...), r, s, now)
	if ask == nil {
		t.Fatalf("%s %s: want ask, got denial %v", r.Tool, r.Arguments, den)
	}
	scope, err := ScopeOf(ask, dir)
	if err != nil {
		t.Fatal(err)
	}
	return Allowed{ID: 7, Scope: scope, Grant: ask.Grant, Matched: ask.Matched, State: s, Made: now}
}

func cmd(line, dir string) Request {
	return req("shell", map[string]string{"command": line, "workdir": dir})
}

// TestShellAllowanceExact is the hostile case: under an allowance for one
// shell line, the same line wrapped in an interpreter or a wrapper, or
// any other line, asks again.
func TestShellAllowanceExact(t *testing.T) {
	tables := []string{g("src-shell", "shell", "ask", "paths", paths("/home/owner/src"))}
	al := allowFor(t, tables, cmd("ls -la", "/home/owner/src"), private, false)
	gs := set(t, tables...)
	for _, tt := range []struct {
		line, dir string
		auto      bool
	}{
		{"ls -la", "/home/owner/src", true},
		{"env sh -c 'ls -la'", "/home/owner/src", false},
		{"env sh -c ls -la", "/home/owner/src", false},
		{"bash -lc 'ls -la'", "/home/owner/src", false},
		{"sh -c 'ls -la'", "/home/owner/src", false},
		{"/usr/bin/time ls -la", "/home/owner/src", false},
		{"nice ls -la", "/home/owner/src", false},
		{"nice -n 19 ls -la", "/home/owner/src", false},
		{"timeout 5 ls -la", "/home/owner/src", false},
		{"ls -la; rm -rf ~", "/home/owner/src", false},
		{"ls -la ", "/home/owner/src", false},
		{"ls  -la", "/home/owner/src", false},
		{"ls -la", "/home/owner/src/sub", false},
		{"/usr/bin/env sh -c 'ls -la'", "/home/owner/src", false},
		{"timeout 5 bash -lc 'ls -la'", "/home/owner/src", false},
		{"exec ls -la", "/home/owner/src", false},
	} {
		// One subtest each: go test -run 'TestShellAllowanceExact/nice'.
		t.Run(tt.line+" in "+tt.dir, func(t *testing.T) {
			dec, ask, den, _ := DecideAllowing(gs, cmd(tt.line, tt.dir), private, now, []Allowed{al})
			switch {
			case den != nil:
				t.Errorf("%q in %s: denied %v", tt.line, tt.dir, den)
			case tt.auto && (!dec.Valid() || dec.Allowance() != 7):
				t.Errorf("%q in %s: want decided by allowance 7, got ask %v", tt.line, tt.dir, ask != nil)
			case !tt.auto && ask == nil:
				t.Errorf("%q in %s: ran without asking (allowance %d)", tt.line, tt.dir, dec.Allowance())
			}
		})
	}
}

// TestAllowanceNeverOverrides: a deny grant, a data-class limit and a
// changed grant decide before an allowance; a more tainted or untrusted
// session lapses it.
func TestAllowanceNeverOverrides(t *testing.T) {
	ask := g("dl", "read_file", "ask", "paths", paths("/home/owner/Downloads"), "max_taint", `"private"`)
	file := read("/home/owner/Downloads/a.pdf")
	al := allowFor(t, []string{ask}, file, private, false)
	tests := []struct {
		name   string
		tables []string
		s      Session
		want   string
		lapse  audit.EndReason
	}{
		{"unchanged", []string{ask}, private, "allowed", ""},
		{"deny grant added", []string{ask, g("no", "read_file", "deny", "paths", paths("/home/owner/Downloads/a.pdf"))}, private, "deny:denied_by_grant", ""},
		{"taint above max_taint", []string{ask}, secret, "deny:no_grant", audit.EndTainted},
		{"untrusted now", []string{ask}, Session{Taint: dataclass.Private, Untrusted: true}, "ask", audit.EndTainted},
		{"recalled now", []string{ask}, Session{Taint: dataclass.Private, Recalled: true}, "ask", audit.EndTainted},
		{"grant edited", []string{g("dl", "read_file", "ask", "paths", paths("/home/owner/Downloads"), "max_taint", `"secret"`)}, private, "ask", audit.EndGrantChanged},
		{"another grant applies", []string{ask, g("dl2", "read_file", "ask", "paths", paths("/home/owner"))}, private, "ask", audit.EndGrantChanged},
		{"grant gone, another asks", []string{g("other", "read_file", "ask", "paths", paths("/home/owner/Downloads"))}, private, "ask", audit.EndGrantChanged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec, a, den, lapsed := DecideAllowing(set(t, tt.tables...), file, tt.s, now, []Allowed{al})
			got := outcome(dec, a, den)
			switch {
			case dec.Valid():
				got = "allowed"
			case a != nil:
				got = "ask"
			}
			if got != tt.want {
				t.Errorf("outcome %s, want %s", got, tt.want)
			}
			var why audit.EndReason
			if len(lapsed) == 1 {
				why = lapsed[0].Reason
			}
			if why != tt.lapse {
				t.Errorf("lapsed %v, want %q", lapsed, tt.lapse)
			}
		})
	}
	if _, _, _, lapsed := DecideAllowing(set(t, ask), file, private, now.Add(MaxAllowanceAge), []Allowed{al}); len(lapsed) != 1 || lapsed[0].Reason != audit.EndExpired {
		t.Errorf("at its longest life: lapsed %v, want expired", lapsed)
	}
}

// TestScopeOfConsult: no session allowance covers a consult.
func TestScopeOfConsult(t *testing.T) {
	if _, err := ScopeOf(&Ask{Tool: "consult", Args: consultArgs()}, false); !errors.Is(err, ErrNoSessionScope) {
		t.Errorf("ScopeOf(consult) = %v, want ErrNoSessionScope", err)
	}
	if _, err := ScopeOf(&Ask{Tool: "http_fetch", Args: mustArgs(t, fetch("https://example.com/x"))}, true); !errors.Is(err, ErrNoSessionScope) {
		t.Errorf("ScopeOf(http_fetch, dir) = %v, want ErrNoSessionScope", err)
	}
}

func consultArgs() toolargs.Args { return toolargs.Consult{Question: "q"} }

func mustArgs(t *testing.T, r Request) toolargs.Args {
	a, err := toolargs.Parse(r.Tool, r.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestStandingGrant: the owner's standing approval of one file or host
// turns an ask into auto for exactly that target, and never a deny.
func TestStandingGrant(t *testing.T) {
	ask := g("dl", "read_file", "ask", "paths", paths("/home/owner/Downloads"))
	st := g("always-1", "read_file", "auto", "paths", paths("/home/owner/Downloads/a.pdf"), "standing", "true")
	web := g("web", "http_fetch", "ask", "hosts", hosts("example.com", "example.org"))
	webSt := g("always-2", "http_fetch", "auto", "hosts", hosts("example.com"), "standing", "true")
	deny := g("no", "read_file", "deny", "paths", paths("/home/owner/Downloads/a.pdf"))
	for _, tt := range []struct {
		name   string
		tables []string
		r      Request
		want   string
	}{
		{"the file", []string{ask, st}, read("/home/owner/Downloads/a.pdf"), "auto:always-1"},
		{"another file", []string{ask, st}, read("/home/owner/Downloads/b.pdf"), "ask:dl"},
		{"standing alone", []string{st}, read("/home/owner/Downloads/a.pdf"), "auto:always-1"},
		{"deny wins", []string{ask, st, deny}, read("/home/owner/Downloads/a.pdf"), "deny:denied_by_grant"},
		{"the host", []string{web, webSt}, fetch("https://example.com/x"), "auto:always-2"},
		{"another host", []string{web, webSt}, fetch("https://example.org/x"), "ask:web"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := outcome(Decide(set(t, tt.tables...), tt.r, private, now)); got != tt.want {
				t.Errorf("outcome %s, want %s", got, tt.want)
			}
		})
	}
}
