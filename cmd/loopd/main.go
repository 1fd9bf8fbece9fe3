// Command loopd runs Boxmaker's conversations: it builds each prompt from
// the session log, calls the model through inferproxy, and asks brokerd
// for every tool call. It has no network and no credential. See package
// loop for its startup and packages session and turn for its invariants.
package main

import (
	"context"
	"log/slog"
	"os"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/loop"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func main() {
	os.Exit(daemon.Main("loopd", os.Args[1:], os.Stderr, func(ctx context.Context, log *slog.Logger, f daemon.Flags) error {
		cfg, err := daemon.Load(f, log, loopd.Load)
		if err != nil {
			return err
		}
		cfg.AllowUIDs = f.Accept(&wire.Loop)
		// Job files are the owner's, never loopd's.
		if cfg.Jobs.OwnerUID, err = f.OwnerUID("[jobs] owner_uid", cfg.Jobs.OwnerUID); err != nil {
			return err
		}
		return loop.Run(ctx, log, cfg)
	}))
}
