//go:build !boxmaker_testhooks

package loop

import "log/slog"

// killAt is the test-hooks build's debug knob (testonly.go); a release
// build has none, so no environment can make loopd kill itself.
func killAt(*slog.Logger) {}
