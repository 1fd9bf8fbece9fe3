// Command memoryd keeps Boxmaker's memory: the identity files handed to
// loopd once per epoch, the append-only notes, the journal of every write,
// and the local recall index over the session logs and notes. It runs the
// memory tool calls brokerd has decided. See package memd for its
// invariants.
package main

import (
	"context"
	"log/slog"
	"os"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/memd"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func main() {
	os.Exit(daemon.Main("memoryd", os.Args[1:], os.Stderr, func(ctx context.Context, log *slog.Logger, f daemon.Flags) error {
		cfg, err := daemon.Load(f, log, memd.Load)
		if err != nil {
			return err
		}
		cfg.MemoryAllowUIDs, cfg.MemtoolAllowUIDs, cfg.AdminAllowUIDs, cfg.ChatAllowUIDs = f.Accept(&wire.Memory), f.Accept(&wire.Memtool), f.Accept(&wire.Memadmin), f.Accept(&wire.Memchat)
		cfg.GateListenerUIDs = f.Listener(&wire.Gate)
		return memd.Run(ctx, log, cfg)
	}))
}
