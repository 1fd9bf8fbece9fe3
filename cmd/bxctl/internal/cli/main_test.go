package cli

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points the owner's state (the default anchors file) at a
// directory of the test run's own, so no test reads or writes the real
// owner's anchors.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bxctl-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
