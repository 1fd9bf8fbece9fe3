package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// gatewayd is started by `bxctl up` only when its config exists:
// bxctl cannot write one (it needs the owner's Mattermost URL, user ids
// and the bot token's secret ref; deploy/gatewayd.toml is the example).
// Its gateway.sock sits in run/gateway, where brokerd's courier finds it.

// gatewaySocket is gatewayd's socket in a state directory.
func gatewaySocket(state string) string {
	return filepath.Join(socketDir(state, "gateway"), "gateway.sock")
}

// gatewayRole returns gatewayd's role if state/config/gatewayd.toml
// exists, or nil.
func gatewayRole(state string) (*role, error) {
	_, err := os.Stat(filepath.Join(state, "config", "gatewayd.toml"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &role{name: "gatewayd", socket: gatewaySocket(state)}, nil
}
