// Package loop is loopd's daemon: it loads the config, runs the startup
// self-test against the model, and serves loop.sock.
//
// Invariant: loopd serves nothing until every self-test check has passed
// (or the owner has named the check in selftest.skip); a failed check
// refuses the start, naming the check, what was seen and the runbook entry.
// loopd has no network and no credential: its only I/O is its sockets
// (the model's, through inferproxy, included), its session files, its
// jobs record (loop/jobs.json), and, read-only, its config and system
// prompt, the owner's job files and the images gatewayd keeps.
package loop

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/broker"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/memory"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/server"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/tools"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/model/selftest"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

//go:embed system.md
var defaultSystem string

// Run runs loopd until ctx is cancelled.
func Run(ctx context.Context, log *slog.Logger, cfg loopd.Config) error {
	system := defaultSystem
	if cfg.SystemFile != "" {
		b, err := os.ReadFile(cfg.SystemFile)
		if err != nil {
			return daemon.Refuse(fmt.Errorf("system prompt: %v", err))
		}
		system = string(b)
	}
	main, err := client(cfg, cfg.Model.MainSlot)
	if err != nil {
		return daemon.Refuse(err)
	}
	bg, err := client(cfg, *cfg.Model.BackgroundSlot)
	if err != nil {
		return daemon.Refuse(err)
	}
	base, _ := baseline(ctx, cfg, system, nil, "", "", 0)
	nCtx, vision, err := startupCheck(ctx, log, cfg, bg, base)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return daemon.Refuse(fmt.Errorf("state dir: %v", err))
	}
	ln, err := rpc.Listen(&wire.Loop, sockets.Config{Dir: cfg.SocketDir, AllowUIDs: cfg.AllowUIDs, AllowGIDs: cfg.AllowGIDs, Logger: log})
	if err != nil {
		return daemon.Refuse(err)
	}
	defer ln.Close()
	engine := &turn.Engine{Model: main, Broker: brokerPort(cfg), Limits: limits(cfg),
		Context: turn.Context{NCtx: nCtx, MaxTokens: main.MaxTokens()},
		Vision:  vision, Media: turn.Cached(loadImage(cfg.StateDir))}
	var mem *memory.Client
	if cfg.MemorySocket != "" {
		mem = &memory.Client{Path: cfg.MemorySocket}
		// memoryd hears of each ended turn off the turn's path, so
		// neither the answer nor the session's next turn waits on it.
		notify := memory.NewNotifier(ctx, mem, log)
		engine.Ended = func(s *session.Session, t int64) { notify.Ended(s.ID, s.Epoch, t) }
	}
	// Jobs run on the background slot, one after another, each a
	// session of its own through brokerd like any other (jobs.go).
	bgEngine := *engine
	bgEngine.Model = bg
	sched := scheduler(cfg, log, &bgEngine, func(id string) (sessionlog.Baseline, error) { return baseline(ctx, cfg, system, mem, id, "", 0) }, mem)
	if err := sched.Start(); err != nil {
		return daemon.Refuse(err)
	}
	m := &server.Manager{
		State:  cfg.StateDir,
		Engine: engine,
		Baseline: func(id, channel string) (sessionlog.Baseline, error) {
			return baseline(ctx, cfg, system, mem, id, channel, 0)
		},
		Log:        log,
		Epoch:      changer(cfg, log, main, bg, nCtx, system, mem),
		Policy:     policy(cfg),
		Jobs:       sched.List,
		JobReports: sched.Reports,
		Status:     statusInfo(cfg, nCtx, main),
		Vision:     vision,
	}
	m.Start(ctx)
	var jobsDone sync.WaitGroup
	runJobs(ctx, sched, &jobsDone)
	log.Info("serving", "socket", ln.Path(), "state", cfg.StateDir)
	err = ln.Serve(ctx, m.Serve)
	m.Wait()
	jobsDone.Wait()
	return err
}

// baseline builds epoch's baseline for session id of channel ("" for
// none): the system prompt, then the identity block from memoryd (when
// one is configured, told the channel), then the core tools (with
// ask_memory when the config offers it). A block memoryd refuses, or no
// answer, refuses the session: it must not start without its identity.
func baseline(ctx context.Context, c loopd.Config, system string, mem *memory.Client, id, channel string, epoch int64) (sessionlog.Baseline, error) {
	b := sessionlog.Baseline{System: strings.TrimSpace(system), Tools: tools.Core(c.AskMemory), Channel: channel}
	if mem == nil {
		return b, nil
	}
	block, err := mem.Identity(ctx, id, channel, epoch)
	if err != nil {
		return sessionlog.Baseline{}, err
	}
	b.System += "\n\n" + block
	return b, nil
}

// brokerPort is the port to brokerd: its socket, or a refusal of every call
// when none is configured.
func brokerPort(c loopd.Config) broker.Port {
	if c.BrokerSocket == "" {
		return broker.Refusing{}
	}
	return &broker.Client{Path: c.BrokerSocket}
}

// startupCheck runs the self-test on the background slot, so that the
// main slot keeps its cached conversation across a restart. The fit
// check counts base, a session's baseline without its identity block
// (memoryd hands that over per session, under its own cap). It returns
// the per-slot context the server reported and whether the model can see
// (its /props modalities.vision).
func startupCheck(ctx context.Context, log *slog.Logger, cfg loopd.Config, c *llama.Client, base sessionlog.Baseline) (int, bool, error) {
	r := selftest.Run(ctx, c, *cfg.Model.BackgroundSlot, selftest.Expect{
		NCtx: cfg.Serving.NCtx, Slots: cfg.Serving.Slots, TemplateSHA256: cfg.Serving.TemplateSHA256,
		OtherSlots: []int{cfg.Model.MainSlot},
		Baseline:   &selftest.Baseline{Messages: sessionlog.Replay(base, nil, 0), Tools: base.Tools},
	})
	var fatal []string
	for _, ck := range r.Checks {
		switch {
		case ck.OK:
			log.Info("self-test passed", "check", ck.Name, "detail", ck.Detail)
		case slices.Contains(cfg.SelfTest.Skip, ck.Name):
			log.Warn("self-test failed; skipped by selftest.skip", "check", ck.Name, "detail", ck.Detail)
		default:
			log.Error("self-test failed", "check", ck.Name, "detail", ck.Detail)
			fatal = append(fatal, ck.Name+": "+ck.Detail)
		}
	}
	if len(fatal) > 0 {
		return 0, false, daemon.Refuse(fmt.Errorf("startup self-test: %s", strings.Join(fatal, " | ")))
	}
	log.Info("model modalities", "vision", r.Vision)
	return r.NCtx, r.Vision, nil
}

// statusInfo is what gatewayd's !status shows of this loopd: its model,
// slot and context, the sockets of the roles it talks to, and
// llama-server's /props through the main slot's client.
func statusInfo(c loopd.Config, nCtx int, main *llama.Client) server.StatusInfo {
	si := server.StatusInfo{Model: c.Model.Name, Slot: c.Model.MainSlot, SlotContext: nCtx,
		Props: func(ctx context.Context) (int, error) {
			p, err := main.Props(ctx)
			if err != nil {
				return 0, err
			}
			return p.SlotContext(), nil
		}}
	for _, p := range []server.StatusPeer{{Role: "inferproxy", Socket: c.InferSocket}, {Role: "brokerd", Socket: c.BrokerSocket}, {Role: "memoryd", Socket: c.MemorySocket}} {
		if p.Socket != "" {
			si.Peers = append(si.Peers, p)
		}
	}
	return si
}
