package layout

import "path/filepath"

// ConfigPath is role's config in state directory state (gatewayd's too,
// which bxctl cannot write: it needs the owner's Mattermost details).
// The first configs `bxctl up` writes there are package
// roleconf/first's, each encoded from its role's config type.
func ConfigPath(state, role string) string { return filepath.Join(Config.In(state), role+".toml") }
