package gateway

import "wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"

// Config is gatewayd.toml, loaded and checked by package
// roleconf/gatewayd, which `bxctl doctor` runs too.
type (
	Config    = gatewayd.Config
	Allow     = gatewayd.Allow
	Approvals = gatewayd.Approvals
)

// DefaultMaxApprovalParts is four parts (decision row of 2026-09-23).
const DefaultMaxApprovalParts = gatewayd.DefaultMaxApprovalParts

// Load reads and checks gatewayd.toml.
func Load(path string) (Config, error) { return gatewayd.Load(path) }
