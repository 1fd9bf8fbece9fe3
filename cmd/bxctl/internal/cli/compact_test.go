package cli

import (
	"strings"
	"testing"
)

// TestCompactUsage: bxctl compact takes one valid session id, and says
// where to look when loopd is not running (the rest is checks/stack's
// TestStackEpochCompactWaits, against a real loopd).
func TestCompactUsage(t *testing.T) {
	if code, _, stderr := run("compact"); code != ExitUsage || !strings.Contains(stderr, "give one session id") {
		t.Errorf("bxctl compact = %d, %q", code, stderr)
	}
	if code, _, stderr := run("compact", "../x"); code != ExitUsage || !strings.Contains(stderr, "session id") {
		t.Errorf("bxctl compact ../x = %d, %q", code, stderr)
	}
	code, _, stderr := run("compact", "--state", t.TempDir(), "s1")
	if code != ExitFailed || !strings.Contains(stderr, "see docs/runbook.md#loopd-not-running") {
		t.Errorf("bxctl compact with no loopd = %d, %q", code, stderr)
	}
}
