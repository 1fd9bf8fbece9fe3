package tools

import (
	"os"
	"testing"
)

// shellTools skips a test whose commands need cat, env, sort and tr on the
// shell tool's fixed PATH (/bin:/usr/bin, the tool image's): the Nix
// sandbox (checks.gate) has only /bin/sh there. With CI set it must run.
func shellTools(t *testing.T) {
	t.Helper()
	for _, p := range []string{"/bin/cat", "/usr/bin/cat"} {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no cat in /bin or /usr/bin for the shell tool's commands")
	}
	t.Skip("did not run: no cat in /bin or /usr/bin (the Nix sandbox has only /bin/sh)")
}
