package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"wntrmute.dev/boxmaker/pkg/sockets"
)

// gatewayd is started by `bxctl up` only when its config exists:
// bxctl cannot write one (it needs the owner's Mattermost URL, user ids
// and the bot token's secret ref; deploy/gatewayd.toml is the example).
// Its gateway.sock sits in run/gateway, where brokerd's courier finds it.

// gatewaySocket is gatewayd's socket in a state directory.
func gatewaySocket(state string) string {
	return filepath.Join(socketDir(state, "gateway"), "gateway.sock")
}

// gatewayConfig is the start of brokerd's first config: the top-level
// key that points its courier at gateway.sock (with no gatewayd running,
// the courier waits and approvals are answered with bxctl).
func gatewayConfig(state string) string {
	return fmt.Sprintf("# brokerd's courier posts pending approvals to gatewayd here.\ngateway_socket = %q\n", gatewaySocket(state))
}

// gatewayRole makes gateway.sock's directory and returns gatewayd's role
// if state/config/gatewayd.toml exists, or nil.
func gatewayRole(state string) (*role, error) {
	if err := sockets.MakeDir(socketDir(state, "gateway"), 0o700); err != nil {
		return nil, err
	}
	_, err := os.Stat(filepath.Join(state, "config", "gatewayd.toml"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &role{name: "gatewayd", socket: gatewaySocket(state)}, nil
}
