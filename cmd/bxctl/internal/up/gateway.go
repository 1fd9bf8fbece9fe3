package up

import (
	"errors"
	"io/fs"
	"os"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// gatewayd is started by `bxctl up` only when its config exists:
// bxctl cannot write one (it needs the owner's Mattermost URL, user ids
// and the bot token's secret ref; deploy/gatewayd.toml is the example).
// Its gateway.sock sits in run/gateway, where brokerd's first config
// points its courier (package layout).

// gatewayRole returns gatewayd's role if state/config/gatewayd.toml
// exists, or nil.
func gatewayRole(state string) (*role, error) {
	_, err := os.Stat(layout.ConfigPath(state, "gatewayd"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &role{name: "gatewayd", socket: layout.Socket(state, &wire.Gateway)}, nil
}
