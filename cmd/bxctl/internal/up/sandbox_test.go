package up

import "wntrmute.dev/boxmaker/pkg/host/ownership"

// This package's tests write owner files under TMPDIR; in the Nix build
// sandbox (checks.gate) that is /build, below a / that reads as nobody's
// (docs/nix.md, "checks.gate in the sandbox").
func init() { ownership.TestOnlyTrustSandboxRoot() }
