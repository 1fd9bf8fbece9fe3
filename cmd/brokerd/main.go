// Command brokerd decides every tool call loopd asks for, against the
// grant files only the owner writes; records each decision in the
// hash-chained audit log before anything runs; parks calls that need the
// owner's approval; and runs allowed calls. See package broker for its
// invariants.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/broker"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func main() {
	var acceptBreak, rebuild, adoptHead, adoptConsult bool
	os.Exit(daemon.Main("brokerd", os.Args[1:], os.Stderr, func(ctx context.Context, log *slog.Logger, f daemon.Flags) error {
		cfg, err := daemon.Load(f, log, brokerd.Load)
		if err != nil {
			return err
		}
		cfg.BrokerAllowUIDs = f.Accept(&wire.Broker)
		cfg.AdminAllowUIDs = f.Accept(&wire.Admin)
		cfg.GateAllowUIDs = f.Accept(&wire.Gate)
		cfg.GatewayAllowUIDs = f.Listener(&wire.Gateway)
		// Grants are the owner's, never brokerd's.
		if cfg.OwnerUID, err = f.OwnerUID("owner_uid", cfg.OwnerUID); err != nil {
			return err
		}
		if rebuild {
			return broker.RebuildState(log, cfg)
		}
		if adoptHead {
			return broker.AdoptAuditHead(log, cfg)
		}
		if adoptConsult {
			return broker.AdoptConsultHead(log, cfg)
		}
		return broker.Run(ctx, log, cfg, acceptBreak)
	}, func(fs *flag.FlagSet) {
		fs.BoolVar(&acceptBreak, "accept-break", false, "record the owner's acceptance of the audit log's first break, then start (see docs/runbook.md#audit-chain-broken)")
		fs.BoolVar(&rebuild, "rebuild-state", false, "rewrite every session's state file from the audit log, then exit (brokerd must be stopped)")
		fs.BoolVar(&adoptHead, "adopt-audit-head", false, "record the audit log's end as its head after the owner decided the log as it is is the log, then exit (see docs/runbook.md#audit-truncated)")
		fs.BoolVar(&adoptConsult, "adopt-consult-head", false, "record the consult log's end as its head after the owner decided the log as it is is the log, then exit (see docs/runbook.md#consult-truncated)")
	}))
}
