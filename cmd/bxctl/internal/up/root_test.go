package up

import (
	"os"
	"testing"
)

// needRoot skips a test that gives files to the layout's owners, which
// only root can (CI runs as root; the Nix sandbox's build user is uid
// 1000, alone in its namespace), unless CI is set, where it must run.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		t.Skip("did not run: needs root (the layout's owners)")
	}
}
