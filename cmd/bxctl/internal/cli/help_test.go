package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestHelpWalk walks every command in bxctl's command table (and every
// subcommand in subcommands), so a command another change adds is
// covered by this test with no edit: -h, -help and --help each print a
// usage on stdout, nothing on stderr, and exit 0, and they win over
// whatever else is on the line (`--state --help` names no state
// directory and nothing is made); a parent refuses an unknown
// subcommand, with or without --help.
func TestHelpWalk(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	t.Setenv(stateEnv, state)
	t.Chdir(t.TempDir())
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var lines [][]string
	for _, n := range names {
		lines = append(lines, []string{n})
		for _, s := range subcommands[n] {
			lines = append(lines, []string{n, s})
		}
	}
	for _, line := range lines {
		for _, h := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"--state", "--help"}, {"--bogus", "x", "--help"}} {
			args := append(append([]string{}, line...), h...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := Main(args, &stdout, &stderr)
				if code != ExitOK || stdout.Len() == 0 || stderr.Len() != 0 {
					t.Errorf("bxctl %s = %d, stdout %q, stderr %q; want the usage on stdout and exit 0", strings.Join(args, " "), code, stdout.String(), stderr.String())
				}
				if !strings.Contains(stdout.String(), "bxctl ") {
					t.Errorf("bxctl %s: %q is not a usage", strings.Join(args, " "), stdout.String())
				}
			})
		}
	}
	entries, _ := os.ReadDir(".")
	if len(entries) != 0 {
		t.Errorf("asking for help made %v in the working directory", entries)
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("asking for help made the state directory %s", state)
	}
	for n := range subcommands {
		if _, ok := commands[n]; !ok {
			t.Errorf("subcommands names %s, which is no command", n)
		}
		for _, args := range [][]string{{n, "no-such-subcommand"}, {n, "no-such-subcommand", "--help"}} {
			var stdout, stderr bytes.Buffer
			if code := Main(args, &stdout, &stderr); code != ExitUsage || !strings.Contains(stderr.String(), "unknown subcommand") || stdout.Len() != 0 {
				t.Errorf("bxctl %s = %d, stdout %q, stderr %q; want the parent's refusal", strings.Join(args, " "), code, stdout.String(), stderr.String())
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"--help"}, &stdout, &stderr); code != ExitOK || !strings.Contains(stdout.String(), "usage: bxctl") {
		t.Errorf("bxctl --help = %d, %q", code, stdout.String())
	}
}
