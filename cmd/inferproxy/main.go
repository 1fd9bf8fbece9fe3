// Command inferproxy forwards bytes between loopd's infer.sock and the one
// llama-server address in its config. See package proxy for its
// invariant and docs/design.md for its place among the roles.
package main

import (
	"context"
	"log/slog"
	"os"

	"wntrmute.dev/boxmaker/cmd/inferproxy/internal/proxy"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func main() {
	os.Exit(daemon.Main("inferproxy", os.Args[1:], os.Stderr, func(ctx context.Context, log *slog.Logger, f daemon.Flags) error {
		cfg, err := daemon.Load(f, log, inferproxy.Load)
		if err != nil {
			return err
		}
		cfg.AllowUIDs = f.Accept(&wire.Infer)
		return proxy.Run(ctx, log, cfg)
	}))
}
