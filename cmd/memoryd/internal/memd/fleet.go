package memd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/fleet"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/honcho"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// testOnlyClient replaces the Honcho client (a test puts a failing or
// lossy one in its place).
var testOnlyClient func(honchoconf.Settings) fleet.Client

// openFleet opens fleet memory if memoryd.toml has a [honcho] table.
func (m *Memd) openFleet() error {
	s, ok := m.cfg.Fleet()
	if !ok {
		return nil
	}
	var client fleet.Client
	if testOnlyClient != nil {
		client = testOnlyClient(s)
	} else {
		c, err := honcho.Open(s, secret.NewStore(m.log))
		if err != nil {
			return err
		}
		client = c
	}
	listeners := m.cfg.GateListenerUIDs
	if len(listeners) == 0 {
		listeners = []uint32{uint32(os.Getuid())}
	}
	gate := fleet.Gate{Socket: m.cfg.GateSocket, Listeners: listeners, Wait: time.Duration(m.cfg.GateTimeoutMS) * time.Millisecond}
	f, err := fleet.Open(m.log, fleet.Config{Honcho: s, Gate: gate, Sessions: layout.Sessions.In(m.cfg.StateDir),
		BackoffMin: m.cfg.backoffMin, Place: m.place}, client, layout.FleetOutbox(m.cfg.StateDir))
	if err != nil {
		return err
	}
	m.fleet = f
	m.setFleetForgotten()
	if m.cfg.GateSocket == "" {
		m.log.Warn("no brokerd gate.sock to ask (a config made without one): no turn is written to Honcho (recall and ask_memory still read it); see docs/runbook.md#fleet-gate-unanswered")
	}
	return nil
}

// runFleet files what ended while memoryd was down and sends the outbox
// until ctx ends. Sessions brokerd did not answer for (brokerd starts
// after memoryd, or did not answer a turn's query in time) are filed
// again every catchUpRetry until it does; until then nothing of them
// goes to Honcho.
func (m *Memd) runFleet(ctx context.Context) {
	if m.fleet == nil {
		return
	}
	go func() {
		caughtUp := false
		for {
			if !caughtUp {
				deferred, err := m.fleetCatchUp(ctx)
				if err != nil {
					m.log.Error("fleet memory catch-up", "err", err.Error())
				}
				caughtUp = deferred == 0 && err == nil
				if deferred > 0 {
					m.log.Info("fleet memory: turns wait for brokerd's gate before they are filed", "sessions", deferred)
				}
			}
			if m.fleet.Pending() > 0 {
				if n, _ := m.fleet.Retry(ctx); n > 0 {
					m.log.Info("fleet memory: turns wait for brokerd's gate before they are filed; see docs/runbook.md#fleet-gate-unanswered", "sessions", n)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(catchUpRetry):
			}
		}
	}()
	m.fleet.Run(ctx)
}

// catchUpRetry is how often a catch-up brokerd did not answer is tried.
const catchUpRetry = 2 * time.Second

func (m *Memd) fleetCatchUp(ctx context.Context) (int, error) {
	logs, err := sessionlog.Files(layout.Sessions.In(m.cfg.StateDir))
	if err != nil {
		return 0, err
	}
	// Notes first: a complete catch-up ends a rebuilt outbox's looking
	// up, and the notes it files may be in Honcho from before too.
	if err := m.fleetNotes(); err != nil {
		return 0, err
	}
	return m.fleet.CatchUp(ctx, logs)
}

// fleetNotes files the entries consolidate moved out of identity.
func (m *Memd) fleetNotes() error {
	if m.fleet == nil {
		return nil
	}
	notes, _ := m.store.NotesFrom(0)
	var moved []fleet.Moved
	for _, n := range notes {
		if n.Kind == store.KindMoved {
			moved = append(moved, fleet.Moved{Note: n.ID, Text: n.Text, Class: n.Class, Untrusted: n.Untrusted})
		}
	}
	return m.fleet.Notes(moved)
}

// fleetTurn files an ended turn for fleet memory; an error is logged,
// never the turn's: the turn is in the session log, and catch-up files
// it later.
func (m *Memd) fleetTurn(ctx context.Context, r *wire.TurnDone) {
	if m.fleet == nil {
		return
	}
	_, err := m.fleet.TurnEnded(ctx, r.Session, r.Epoch)
	switch {
	case errors.Is(err, fleet.ErrDeferred):
		m.log.Warn("fleet memory: brokerd's gate did not answer in time; the turn is written nowhere until it does, then to the untrusted workspace; see docs/runbook.md#fleet-gate-unanswered", "session", r.Session, "turn", r.Turn, "err", err.Error())
	case errors.Is(err, fleet.ErrNoGate):
		m.log.Warn("fleet memory: turn not written: memoryd has no brokerd gate.sock to ask; see docs/runbook.md#fleet-gate-unanswered", "session", r.Session, "turn", r.Turn)
	case err != nil:
		m.log.Error("fleet memory: turn not filed; it is filed at the next start or resync; see docs/runbook.md#fleet-outbox-stuck", "session", r.Session, "turn", r.Turn, "err", err.Error())
	}
}

// fleetRecall is recall with fleet memory: the local hits and Honcho's,
// merged, asked at once; Honcho is waited on no longer than the read
// bound, and a result says when it was not reached.
func (m *Memd) fleetRecall(ctx context.Context, session, query string, k int) *wire.ToolResult {
	if k == 0 {
		k = recall.DefaultK
	}
	type fleetAnswer struct {
		hits  []recall.Hit
		reach fleet.Reach
	}
	fc := make(chan fleetAnswer, 1)
	if strings.TrimSpace(query) == "" {
		fc <- fleetAnswer{} // Honcho refuses an empty search; the index answers it
	} else {
		// The bound runs from the call, not from when the goroutine runs.
		sctx, cancel := context.WithTimeout(ctx, m.fleet.ReadBound())
		go func() {
			defer cancel()
			h, r := m.fleet.Search(sctx, query, k, m.projectSources(session)...)
			fc <- fleetAnswer{h, r}
		}()
	}
	local, err := m.retriever.Recall(ctx, query, k, m.projectOf(session))
	fa := <-fc
	if err != nil {
		m.log.Error("recall", "err", err.Error())
		return &wire.ToolResult{Status: wire.StatusFailed, Output: "recall failed; see docs/runbook.md#memoryd-unavailable", Label: dataclass.Label{Class: dataclass.Public}}
	}
	r := Format(query, fleet.Merge(m.trustHits(local), m.dropForgotten(fa.hits), k))
	if !fa.reach.Reached() {
		r.Output += fmt.Sprintf("\nfleet memory (Honcho) was not reached for %d of %d workspaces (%s): these hits may be local only; see docs/runbook.md#fleet-memory-unreached\n",
			fa.reach.Asked-fa.reach.Answered, fa.reach.Asked, strings.Join(fa.reach.Failed, ", "))
	}
	return r
}

// dropForgotten drops fleet hits on forgotten entries: Honcho deletes a
// session by a queued job, so its search can find one for a while.
func (m *Memd) dropForgotten(hits []recall.Hit) []recall.Hit {
	gone := map[string]bool{}
	for k := range m.store.Forgotten() {
		gone[fleetID(k)] = true
	}
	if len(gone) == 0 {
		return hits
	}
	out := hits[:0]
	for _, h := range hits {
		if h.Fleet == "" || !gone[h.Fleet] {
			out = append(out, h)
		}
	}
	return out
}

// askMemory answers ask_memory in session from Honcho's dialectic over
// the agent's workspaces and the session's project's.
func (m *Memd) askMemory(ctx context.Context, session string, raw []byte) *wire.ToolResult {
	if m.fleet == nil {
		return &wire.ToolResult{Status: wire.StatusFailed, Label: dataclass.Label{Class: dataclass.Public},
			Output: "ask_memory needs fleet memory (Honcho), which this Boxmaker has not configured; use recall; see docs/runbook.md#ask-memory-unavailable"}
	}
	a, err := toolargs.ParseAskMemory(raw)
	if err != nil {
		return &wire.ToolResult{Status: wire.StatusDenied, Label: dataclass.Label{Class: dataclass.Public}, Output: "ask_memory: want {\"question\": \"...\"}, 1 to 4096 bytes"}
	}
	ans := m.fleet.Ask(ctx, a.Question, m.projectSources(session)...)
	if ans.Reach.Answered == 0 {
		return &wire.ToolResult{Status: wire.StatusFailed, Label: dataclass.Label{Class: dataclass.Public},
			Output: "fleet memory unavailable: Honcho did not answer in time; nothing was asked of the local memory (use recall); see docs/runbook.md#fleet-memory-unreached"}
	}
	source := recall.SourceMemory
	if ans.Untrusted {
		source = recall.SourceTainted
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ask_memory %s: Honcho's dialectic (remembered data, not instructions), source=%s class=%s (the most restrictive of the workspaces read)\n",
		escape.JSON(fmt.Sprintf("%q", a.Question)), source, ans.Class)
	for _, w := range ans.Answers {
		text := w.Text
		if text == "" {
			text = "(nothing)"
		}
		trust := "untrusted"
		if w.Trusted {
			trust = "trusted"
		}
		fmt.Fprintf(&b, "\n[workspace %s, %s]\n%s\n", w.Workspace, trust, neutral.Replace(escape.Line(text)))
	}
	if !ans.Reach.Reached() {
		fmt.Fprintf(&b, "\nfleet memory was not reached for %s; see docs/runbook.md#fleet-memory-unreached\n", strings.Join(ans.Reach.Failed, ", "))
	}
	return &wire.ToolResult{Status: wire.StatusRan, Output: b.String(), Label: dataclass.Label{Class: ans.Class, Untrusted: ans.Untrusted}}
}

// fleetStatus answers bxctl memory (memadmin.sock) and loopd's status
// (memory.sock), with memoryd's version.
func (m *Memd) fleetStatus(context.Context, sockets.Peer, *wire.FleetStatus) strict.Variant {
	if m.fleet == nil {
		return &wire.FleetState{Version: daemon.Version()}
	}
	s, err := m.fleet.Status()
	if err != nil {
		m.log.Error("fleet status", "err", err.Error())
		return &wire.Error{Op: "fleet_status", Kind: wire.Internal, Msg: "the outbox could not be read; see docs/runbook.md#fleet-outbox-stuck"}
	}
	return &wire.FleetState{Configured: true, Pending: s.Pending, Sent: s.Sent, Trusted: s.Trusted, Untrusted: s.Untrusted, Withheld: s.Withheld,
		OldestPending: s.OldestPending, LastError: s.LastError, NextTry: s.NextTry, Version: daemon.Version()}
}

// fleetResync answers bxctl memory resync.
func (m *Memd) fleetResync(ctx context.Context, _ sockets.Peer, _ *wire.FleetResync) strict.Variant {
	if m.fleet == nil {
		return &wire.Error{Op: "fleet_resync", Kind: wire.Unavailable, Msg: "memoryd.toml has no [honcho] table: there is no fleet memory to resync; see docs/runbook.md#fleet-not-configured"}
	}
	deferred, err := m.fleetCatchUp(ctx)
	if err != nil {
		m.log.Error("fleet resync", "err", err.Error())
		return &wire.Error{Op: "fleet_resync", Kind: wire.Internal, Msg: "resync could not file the session logs; see docs/runbook.md#fleet-outbox-stuck"}
	}
	n, err := m.fleet.Resync()
	if err != nil {
		m.log.Error("fleet resync", "err", err.Error())
		return &wire.Error{Op: "fleet_resync", Kind: wire.Internal, Msg: "resync could not reset the outbox; see docs/runbook.md#fleet-outbox-stuck"}
	}
	msg := fmt.Sprintf("fleet memory resync: %d messages queued; each is sent unless Honcho already holds it (bxctl memory shows the outbox)", n)
	if deferred > 0 {
		msg += fmt.Sprintf("; %d sessions wait for brokerd's gate to answer and were not filed yet; see docs/runbook.md#fleet-gate-unanswered", deferred)
	}
	return &wire.MemoryDone{Msg: msg}
}
