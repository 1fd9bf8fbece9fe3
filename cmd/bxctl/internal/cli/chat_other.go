//go:build !linux

package cli

import "io"

// ttyOutput reports no terminal where bxctl cannot ask: Boxmaker runs on
// Linux, and elsewhere plain output without escape sequences is the safe
// choice.
func ttyOutput(io.Writer) bool { return false }
