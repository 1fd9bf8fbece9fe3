// Package broker is brokerd's daemon: it decides every tool call loopd
// sends on broker.sock, records each decision in the audit log before
// anything runs, and parks calls that need the owner until the owner
// answers, on admin.sock (bxctl) or in the chat (gatewayd, reached over
// gateway.sock by brokerd's courier). It runs allowed calls itself
// (read_attachment, post_file), through memoryd's memtool.sock (memory
// calls), or in a container through the runner (every other tool).
//
// Invariants:
//   - broker.sock takes tool requests and two read-only queries
//     (find_tool's pinned catalog, status); admin.sock takes the owner's
//     answers, allowance revocations, grant proposals (write, drop), MCP
//     listings and queries; each refuses the other's messages with
//     forbidden and logs the refusal (neither gets an audit record: it is
//     no decision);
//   - every tool request gets exactly one decision record, denials
//     included, written before the answer is sent or anything runs; a
//     request that cannot be recorded is denied, never run;
//   - grants are read afresh for every decision and re-decision, so an
//     owner's edit takes effect at once, and an invalid set denies all;
//   - an approval re-decides against the grants and taint of that moment,
//     and runs only if the outcome is still ask or auto;
//   - loopd's word is taken for nothing but the request itself: the
//     session's taint is brokerd's own (package ledger);
//   - gate.sock answers a session's state and nothing else (memoryd's
//     clean-turn gate): it can neither run a tool nor answer an approval.
package broker

import (
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/ledger"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/pending"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Broker is the running daemon's state.
type Broker struct {
	cfg     brokerd.Config
	log     *slog.Logger
	ledger  *ledger.Ledger
	pending *pending.Table
	runner  runner.Runner
	now     func() time.Time
	consult consultState // consult.go
	settle  sync.Map     // approval id → chan string: an approve waiting for its answer's outcome (allowance.go)
	holding sync.Map     // allowance id → true: its chat connection is held open (allowance.go)
}

// Run serves both sockets until ctx is cancelled. With acceptBreak it
// first records the owner's acceptance of a broken audit chain.
func Run(ctx context.Context, log *slog.Logger, cfg brokerd.Config, acceptBreak bool) error {
	return run(ctx, log, cfg, acceptBreak, nil)
}

// run is Run; tune, if not nil, adjusts the runner's settings before
// the runner starts (this package's tests give it runner.TestOnlyNetwork).
func run(ctx context.Context, log *slog.Logger, cfg brokerd.Config, acceptBreak bool, tune func(*runner.Config)) error {
	auditDir := layout.Audit.In(cfg.StateDir)
	if acceptBreak {
		ab, err := audit.AcceptBreak(auditDir, audit.Options{})
		if err != nil {
			return daemon.Refuse(fmt.Errorf("accept break: %v", err))
		}
		if ab == nil {
			log.Info("accept-break: the audit chain holds; nothing to accept")
		} else {
			log.Warn("accept-break: recorded the owner's acceptance of a broken chain", "file", ab.File, "line", ab.Line)
		}
	}
	l, err := ledger.Open(layout.BrokerSessions(cfg.StateDir), auditDir, ledger.Options{})
	if err != nil {
		return daemon.Refuse(err)
	}
	defer l.Close()
	consult, err := openConsultLog(log, cfg)
	if err != nil {
		return daemon.Refuse(err)
	}
	defer consult.close()
	table, err := pending.New(cfg.ApprovalTTL(), pending.Options{})
	if err != nil {
		return daemon.Refuse(err)
	}
	run, err := startRunner(ctx, log, cfg, tune)
	if errors.Is(err, runner.ErrPodmanSlow) {
		// Not a refusal: systemd starts brokerd again (exit 1).
		return err
	}
	if err != nil {
		return daemon.Refuse(err)
	}
	b := &Broker{cfg: cfg, log: log, ledger: l, pending: table, runner: run, now: time.Now, consult: consult}
	bl, err := rpc.Listen(&wire.Broker, sockets.Config{Dir: cfg.BrokerSocketDir, AllowUIDs: cfg.BrokerAllowUIDs, Logger: log})
	if err != nil {
		return daemon.Refuse(err)
	}
	defer bl.Close()
	gl, err := b.listenGate()
	if err != nil {
		return daemon.Refuse(err)
	}
	// admin.sock is listened on last: whoever waits for it (bxctl up, the
	// tests) then finds every other socket of brokerd's already there.
	al, err := rpc.Listen(&wire.Admin, sockets.Config{Dir: cfg.AdminSocketDir, AllowUIDs: cfg.AdminAllowUIDs, Logger: log})
	if err != nil {
		if gl != nil {
			gl.Close()
		}
		return daemon.Refuse(err)
	}
	defer al.Close()
	log.Info("serving", "broker", bl.Path(), "admin", al.Path(), "grants", cfg.GrantsDir)
	if cfg.GatewaySocket != "" {
		go b.courier(ctx)
	}
	errc := make(chan error, 3)
	go func() {
		errc <- bl.Serve(ctx, rpc.NewServer(&wire.Broker, log, rpc.Stream(b.serveTool), rpc.On(b.statusSummary), rpc.On(b.findTools)).Serve)
	}()
	go func() { errc <- al.Serve(ctx, b.adminServer().Serve) }()
	n := 2
	if gl != nil {
		defer gl.Close()
		n++
		go func() { errc <- gl.Serve(ctx, b.gateServer().Serve) }()
	}
	var errs []error
	for range n {
		errs = append(errs, <-errc)
	}
	// Every call has answered (Serve waits for its handlers), but the
	// runner removes a container whose tool exited after the answer:
	// wait for those removals, bounded, so a normal stop leaves no
	// container. A crash leaves them to the next start's Sweep.
	if s, ok := run.(runner.Settler); ok {
		sctx, cancel := context.WithTimeout(context.Background(), runner.SettleWait)
		if err := s.Settle(sctx); err != nil {
			log.Warn("tool containers were still being removed when brokerd stopped; the next start removes them", "err", err.Error())
		}
		cancel()
	}
	return errors.Join(errs...)
}

// startRunner makes the runner brokerd.toml asks for: with a [runner]
// table, Podman, checked (the service answers, the tool image is there,
// a container gets every limit) and swept of this brokerd's leftover
// containers; without one, the refusing runner.
func startRunner(ctx context.Context, log *slog.Logger, cfg brokerd.Config, tune func(*runner.Config)) (runner.Runner, error) {
	if cfg.Runner == nil {
		log.Warn("no [runner] in the config: every allowed tool call fails; see docs/runbook.md#runner-unavailable")
		return runner.Refusing{}, nil
	}
	store := secret.NewStore(log)
	secrets := func(name string) (secret.Value, error) {
		ref, ok := cfg.Secrets[name]
		if !ok {
			return secret.Value{}, fmt.Errorf("no entry %q under [secrets]", name)
		}
		return store.Load(ref)
	}
	rc := runner.Config{Runner: *cfg.Runner}
	if tune != nil {
		tune(&rc)
	}
	p, err := runner.New(rc, runner.Instance(cfg.StateDir), layout.BrokerScratch(cfg.StateDir), cfg.Protected(), secrets, log)
	if err != nil {
		return nil, err
	}
	n, err := p.Sweep(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		log.Warn("removed tool containers left by an earlier brokerd", "count", n)
	}
	if err := p.Check(ctx); err != nil {
		return nil, err
	}
	log.Info("tool containers ready", "podman", cfg.Runner.PodmanSocket, "image", cfg.Runner.ToolImage)
	return p, nil
}

// RebuildState rewrites every session's state file from the audit log
// alone (brokerd -rebuild-state, with brokerd stopped: the ledger's lock
// refuses it otherwise).
func RebuildState(log *slog.Logger, cfg brokerd.Config) error {
	rep, err := ledger.Rebuild(layout.Audit.In(cfg.StateDir), layout.BrokerSessions(cfg.StateDir))
	if err != nil {
		return err
	}
	log.Info("session state rebuilt from the audit log", "written", len(rep.Written), "unchanged", len(rep.Unchanged),
		"extra", rep.Extra, "orphans", rep.Orphans)
	return nil
}

// AdoptAuditHead is brokerd --adopt-audit-head: the owner's decision that
// the audit log as it is now is the log (after restoring what could be
// restored; see docs/runbook.md#audit-truncated). brokerd must be stopped.
func AdoptAuditHead(log *slog.Logger, cfg brokerd.Config) error {
	old, head, err := ledger.AdoptHead(layout.Audit.In(cfg.StateDir), layout.BrokerSessions(cfg.StateDir), time.Now())
	return adopted(log, "adopt-audit-head: the audit log's end is recorded as its head; the old record is kept beside it", old, head, err)
}

// AdoptConsultHead is brokerd --adopt-consult-head: the owner's decision
// that the consult log as it is now is the log (see
// docs/runbook.md#consult-truncated). It holds the ledger's lock, so
// brokerd must be stopped.
func AdoptConsultHead(log *slog.Logger, cfg brokerd.Config) error {
	var old *audit.Head
	var head audit.Head
	err := ledger.WhileStopped("adopt consult head", layout.BrokerSessions(cfg.StateDir), func() (err error) {
		old, head, err = consultlog.AdoptHead(layout.ConsultLog.In(cfg.StateDir), time.Now())
		return err
	})
	return adopted(log, "adopt-consult-head: the consult log's end is recorded as its head; the old record is kept beside it", old, head, err)
}

// adopted logs an adoption's old and new head, or returns its error.
func adopted(log *slog.Logger, msg string, old *audit.Head, head audit.Head, err error) error {
	if err != nil {
		return err
	}
	attrs := []any{"seq", head.Seq, "hash", head.Hash}
	if old != nil {
		attrs = append(attrs, "old_seq", old.Seq, "old_hash", old.Hash)
	}
	log.Warn(msg, attrs...)
	return nil
}
