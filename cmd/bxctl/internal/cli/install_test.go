package cli

import (
	"strings"
	"testing"
)

// TestInstallExpectFlag: --expect is a sha256 digest or a usage error,
// decided before stdin is read or the host looked at.
func TestInstallExpectFlag(t *testing.T) {
	for _, bad := range []string{"abc", "sha256:" + strings.Repeat("A", 64), "sha512:" + strings.Repeat("0", 64), "sha256:" + strings.Repeat("0", 63)} {
		if code, _, stderr := run("install", "--images", "/x", "--llama", "10.0.0.1:8080", "--expect", bad); code != ExitUsage || !strings.Contains(stderr, "--expect is sha256:") {
			t.Errorf("bxctl install --expect %q = %d, %q; want a usage error", bad, code, stderr)
		}
	}
}
