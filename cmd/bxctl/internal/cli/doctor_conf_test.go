package cli

import (
	"fmt"

	"wntrmute.dev/boxmaker/pkg/layout"
)

// gatewayConf is a gatewayd.toml gatewayd's own loader accepts.
func gatewayConf(state, url, token string) string {
	return fmt.Sprintf("url = %q\ntoken = %q\nstate_dir = %q\nloop_socket = %q\nsocket_dir = %q\n\n[allow]\nusers = [\"8d5qj1c3kpgz5e9fxw7ty4bn3h\"]\n",
		url, token, state, layout.LoopRun.SocketIn(state), layout.GatewayRun.In(state))
}
