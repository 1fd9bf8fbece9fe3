package server

import (
	"context"
	"os"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// StatusInfo is what a status answer takes from loopd's config and its
// start: the model, its slot and context, the roles loopd talks to, and
// how to ask llama-server for its context per slot (/props through
// inferproxy, on the main slot's client).
type StatusInfo struct {
	Model       string
	Slot        int
	SlotContext int
	Peers       []StatusPeer
	Props       func(ctx context.Context) (int, error)
}

// StatusPeer is a role loopd connects to, by its socket's path.
type StatusPeer struct {
	Role, Socket string
}

// status answers gatewayd's !status (wire.StatusQuery): read-only, from
// the session's logs, the open session's state, and each peer's answer
// under its own bound (status_peers.go).
func (m *Manager) status(ctx context.Context, _ sockets.Peer, q *wire.StatusQuery) strict.Variant {
	if err := wire.CheckSessionID(q.Session); err != nil {
		return &wire.Error{Op: "status_query", Kind: wire.Invalid, Msg: err.Error()}
	}
	st := &wire.SessionStatus{Session: q.Session, Model: m.Status.Model, Slot: m.Status.Slot, SlotContext: m.Status.SlotContext,
		Roles: []wire.RoleState{}, Jobs: []wire.JobNext{}, Approvals: []wire.ApprovalBrief{}, Allowances: []wire.AllowanceBrief{},
		Version: daemon.Version()}
	m.mu.Lock()
	l := m.sessions[q.Session]
	m.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		st.Running = l.running
		l.mu.Unlock()
	}
	files, _ := sessionlog.Files(layout.Sessions.In(m.State))
	y, mo, d := time.Now().UTC().Date()
	midnight := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
	var prefillUS int64
	for _, f := range files {
		id, epoch, err := sessionlog.Name(f)
		if err != nil {
			continue
		}
		fi, err := os.Stat(f)
		today := err == nil && !fi.ModTime().Before(midnight)
		mine := id == q.Session
		if !today && !mine {
			continue
		}
		if mine && epoch >= st.Epoch {
			st.Epoch, st.Compactions = epoch, epoch
		}
		var gap int
		sessionlog.Scan(f, func(_ int, r sessionlog.Record, _ sessionlog.Trust) error {
			switch v := r.(type) {
			case *sessionlog.Usage:
				if today {
					prefillUS += v.PromptUS
				}
				if mine && epoch == st.Epoch {
					if v.Turn != st.Turn {
						st.Turn, gap = v.Turn, 0
					}
					gap += max(v.CacheGap, 0)
					st.ContextTokens, st.Cached, st.Reread = v.CacheN+v.PromptN+v.PredictedN, v.CacheN, gap
				}
			case *sessionlog.Approval:
				if mine {
					st.Approval = v.State == "pending"
				}
			}
			return nil
		})
	}
	st.Approval = st.Approval && st.Running
	st.TodayPrefillMS = prefillUS / 1000
	m.probePeers(ctx, st)
	if m.Jobs != nil {
		for _, j := range m.Jobs().Jobs {
			st.Jobs = append(st.Jobs, wire.JobNext{Name: j.Name, Next: j.Next})
		}
	}
	return st
}
