package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGrantsUsage(t *testing.T) {
	for _, args := range [][]string{{"grants"}, {"grants", "list"}, {"grants", "check"}, {"grants", "check", "a", "b"}, {"grants", "check", "--bogus", "a"}} {
		if code, _, stderr := run(args...); code != ExitUsage || !strings.Contains(stderr, "bxctl grants check") {
			t.Errorf("bxctl %s = %d, %q; want a usage error", strings.Join(args, " "), code, stderr)
		}
	}
	if code, _, stderr := run(); code != ExitUsage || !strings.Contains(stderr, "grants") {
		t.Errorf("bxctl lists no grants command: %q", stderr)
	}
}

// TestDeployGrantsAreValid: the examples shipped in deploy/grants are
// accepted by the same loader brokerd uses, and cover every tool in
// every mode.
func TestDeployGrantsAreValid(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "deploy", "grants")
	code, out, stderr := run("grants", "check", "--list", dir)
	if code != ExitOK {
		t.Fatalf("bxctl grants check deploy/grants = %d\n%s%s", code, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "ok: 5 files, 13 grants") {
		t.Errorf("summary = %q", last)
	}
	seen := map[string]bool{}
	notes := 0
	for _, l := range lines[:len(lines)-1] {
		if strings.HasPrefix(l, "note: ") {
			notes++
			// The example lets no memory out: consult stays off until
			// the owner decides, and the check says how to decide.
			if !strings.Contains(l, "consult grant consult-glm (mode ask) lets no memory text leave") || !strings.HasSuffix(l, "see docs/runbook.md#consult-identity") {
				t.Errorf("note %q", l)
			}
			continue
		}
		f := strings.Fields(l)
		if len(f) != 5 || len(f[4]) != 64 {
			t.Errorf("list line %q: want file, id, tool, mode, sha256", l)
			continue
		}
		seen[f[2]+" "+f[3]] = true
	}
	for _, tool := range []string{"read_file", "write_file", "shell", "http_fetch"} {
		for _, mode := range []string{"auto", "ask", "deny"} {
			if !seen[tool+" "+mode] {
				t.Errorf("deploy/grants has no %s %s example", tool, mode)
			}
		}
	}
	if notes != 1 {
		t.Errorf("%d notes, want one for the consult grant", notes)
	}
	if !seen["consult ask"] {
		t.Error("deploy/grants has no consult ask example: the owner must see each payload before it leaves")
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Errorf("deploy/grants/README.md: %v", err)
	}
}

func TestGrantsCheckReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.toml", "[[grant]]\nid = \"a\"\ntool = \"read_file\"\npaths = [\"/\"]\nmax_taint = \"private\"\nmode = \"auto\"\n")
	write("b.toml", "[[grant]]\nid = \"b\"\ntool = \"shell\"\npaths = [\"/src\"]\nmax_taint = \"private\"\nmode = \"deny\"\nsecret = \"x\"\n")
	write("c.toml.bak", "")
	code, out, stderr := run("grants", "check", dir)
	if code != ExitFailed {
		t.Fatalf("grants check = %d, want %d\n%s%s", code, ExitFailed, out, stderr)
	}
	want := []string{
		filepath.Join(dir, "a.toml") + `: grant a: path "/" grants the whole file system`,
		filepath.Join(dir, "b.toml") + ": grant b: secret \"x\" must be 1 to 64 uppercase letters",
		filepath.Join(dir, "c.toml.bak") + ": not a grant file",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Errorf("got %d problem lines, want %d:\n%s", len(lines), len(want), out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(stderr, "3 problems") || !strings.Contains(stderr, "see docs/runbook.md#grants-invalid") {
		t.Errorf("stderr = %q", stderr)
	}
	if code, out, _ := run("grants", "check", filepath.Join(dir, "missing")); code != ExitFailed || !strings.Contains(out, "cannot read the grant directory") {
		t.Errorf("grants check missing = %d, %q", code, out)
	}
}

func TestGrantsCheckCountsExpired(t *testing.T) {
	dir := t.TempDir()
	body := "[[grant]]\nid = \"old\"\ntool = \"read_file\"\npaths = [\"/x\"]\nmax_taint = \"private\"\nexpires = \"2020-01-01T00:00:00Z\"\nmode = \"auto\"\n"
	os.WriteFile(filepath.Join(dir, "old.toml"), []byte(body), 0o644)
	if code, out, _ := run("grants", "check", dir); code != ExitOK || strings.TrimSpace(out) != "ok: 1 files, 1 grants (1 expired, which match nothing)" {
		t.Errorf("grants check = %d, %q", code, out)
	}
}

// TestGrantsCheckSaysWhatMemoryLeaves: each consult grant that allows or
// asks gets a note saying which memory text it lets out, and that auto
// sends bodies unread; deny grants and other tools get none.
func TestGrantsCheckSaysWhatMemoryLeaves(t *testing.T) {
	dir := t.TempDir()
	c := func(id, mode, memory string) string {
		s := "[[grant]]\nid = \"" + id + "\"\ntool = \"consult\"\nhosts = [\"api.example.com\"]\nsecret = \"K\"\nmodel = \"m\"\nmode = \"" + mode + "\"\n"
		if mode == "deny" {
			s += "max_taint = \"secret\"\n"
		} else {
			s += "max_taint = \"private\"\n"
		}
		if memory != "" {
			s += "memory = \"" + memory + "\"\n"
		}
		return s
	}
	body := c("a-none", "ask", "") + c("b-id", "ask", "identity_may_leave") + c("c-all", "auto", "all_may_leave") + c("d-deny", "deny", "") +
		"[[grant]]\nid = \"e-fetch\"\ntool = \"http_fetch\"\nhosts = [\"a.example\"]\nmax_taint = \"private\"\nmode = \"auto\"\n"
	if err := os.WriteFile(filepath.Join(dir, "g.toml"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run("grants", "check", dir)
	if code != ExitOK {
		t.Fatalf("grants check = %d\n%s%s", code, out, stderr)
	}
	var notes []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "note: ") {
			notes = append(notes, l)
		}
	}
	want := []struct{ id, says string }{
		{"a-none (mode ask)", "lets no memory text leave, so it allows no consult"},
		{"b-id (mode ask)", "lets the identity files"},
		{"c-all (mode auto)", "lets all memory text leave"},
	}
	if len(notes) != len(want) {
		t.Fatalf("notes %q, want %d", notes, len(want))
	}
	for i, w := range want {
		if !strings.Contains(notes[i], "consult grant "+w.id+" "+w.says) {
			t.Errorf("note %q, want %q", notes[i], w.says)
		}
	}
	if strings.Contains(notes[1], "without your reading") || !strings.Contains(notes[2], "without your reading it") {
		t.Errorf("the auto warning is on the wrong note: %q", notes)
	}
}
