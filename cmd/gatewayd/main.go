// Command gatewayd carries the owner's messages between Mattermost and
// loopd, and posts brokerd's pending approvals in the asking thread. It
// holds the bot token (from the secret store), reaches Mattermost
// outbound only and listens on no TCP port: only on gateway.sock, for
// brokerd. See package gateway for its invariants.
package main

import (
	"context"
	"log/slog"
	"os"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/gateway"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func main() {
	os.Exit(daemon.Main("gatewayd", os.Args[1:], os.Stderr, func(ctx context.Context, log *slog.Logger, f daemon.Flags) error {
		cfg, err := daemon.Load(f, log, gatewayd.Load)
		if err != nil {
			return err
		}
		cfg.AllowUIDs = f.Accept(&wire.Gateway)
		return gateway.Run(ctx, log, cfg)
	}))
}
