// Package formattest is the test every daemon passes on the state
// directory's format (package layout's format file): its real binary,
// built here, refuses a state of a newer format than it knows, and a
// format file it cannot read, before it reads anything else; and it
// takes a state without one (format 0, made before formats were
// recorded) past that check.
//
// Invariant: the binary is the role's own main package, built with the
// tags the repository builds it with; nothing here starts a role that
// could serve.
package formattest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// build builds cmd/<role> into a test directory.
func build(t *testing.T, role string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), role)
	args := []string{"build", "-o", bin}
	if b, err := os.ReadFile(filepath.Join(root, "cmd", "brokerd", "tags.txt")); err == nil && len(bytes.TrimSpace(b)) > 0 {
		args = append(args, "-tags", strings.Join(strings.Fields(string(b)), ","))
	}
	cmd := exec.Command("go", append(args, "./cmd/"+role)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", role, err, out)
	}
	return bin
}

// run runs the role on a state directory whose format file holds text
// ("" for none) and returns its exit code and stderr.
func run(t *testing.T, bin, role, text string) (int, string) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(layout.Config.In(state), 0o700); err != nil {
		t.Fatal(err)
	}
	if text != "" {
		if err := os.WriteFile(layout.FormatFile.In(state), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-config", layout.ConfigPath(state, role), "-state", state)
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("%s on format %q: %v (want it to refuse), stderr:\n%s", role, text, err, stderr.String())
	}
	return ee.ExitCode(), stderr.String()
}

// Refuses is the format test of role (cmd/<role>).
func Refuses(t *testing.T, role string) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := build(t, role)
	newer := layout.Format + 1
	code, out := run(t, bin, role, layout.FormatText(newer))
	want := "has format " + strconv.Itoa(newer) + ", newer than the " + strconv.Itoa(layout.Format) + " this " + role + " knows"
	if code != 2 || !strings.Contains(out, want) || !strings.Contains(out, "docs/runbook.md#state-newer") {
		t.Errorf("format %d: exit %d, stderr:\n%s\nwant exit 2 with %q and the runbook's state-newer", newer, code, out, want)
	}
	if strings.Contains(out, "layout:") || strings.Contains(out, "config") && !strings.Contains(out, "-config") && strings.Contains(out, "no such file") {
		t.Errorf("format %d: it looked past the format first:\n%s", newer, out)
	}
	code, out = run(t, bin, role, "2 \n")
	if code != 2 || !strings.Contains(out, "docs/runbook.md#state-format") {
		t.Errorf("a garbled format file: exit %d, stderr:\n%s\nwant exit 2 with the runbook's state-format", code, out)
	}
	// Format 0 (no file) and this build's format pass the check: the
	// role refuses later, on the missing config or layout.
	for _, text := range []string{"", layout.FormatText(layout.Format)} {
		code, out = run(t, bin, role, text)
		if code != 2 || strings.Contains(out, "#state-") {
			t.Errorf("format %q: exit %d, stderr:\n%s\nwant it past the format check (refused later, for its config or layout)", text, code, out)
		}
	}
}
