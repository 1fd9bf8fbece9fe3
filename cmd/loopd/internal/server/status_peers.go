package server

import (
	"context"
	"net"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/procinfo"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// PeerProbe bounds each of a status answer's questions to another role
// or to llama-server; they are asked at once, so the answer waits at
// most this long for all of them (gatewayd waits longer for loopd).
var PeerProbe = 1500 * time.Millisecond

// probePeers asks, at once and each under PeerProbe: brokerd for its
// approvals and allowances (broker.sock's read-only BrokerStatusQuery),
// memoryd for the outbox (memory.sock's FleetStatus), inferproxy for a
// connection and llama-server for /props through it; and reads the
// owner's newest anchor time from metrics/. A peer that accepts and
// never answers is reported as such, never waited for past the bound.
func (m *Manager) probePeers(ctx context.Context, st *wire.SessionStatus) {
	ctx, cancel := context.WithTimeout(ctx, PeerProbe)
	defer cancel()
	silent := "did not answer within " + PeerProbe.String()
	// The probes write into res, never into st: one that outlives the
	// bound (it should not: each takes ctx) writes where nobody reads.
	var mu sync.Mutex
	var wg sync.WaitGroup
	res := &wire.SessionStatus{SlotContext: st.SlotContext, Approvals: st.Approvals, Allowances: st.Allowances,
		BrokerError: "brokerd is not configured", FleetError: "memoryd is not configured", Server: "llama-server " + silent}
	roles := make([]wire.RoleState, len(m.Status.Peers))
	for _, p := range m.Status.Peers {
		switch p.Role {
		case layout.Brokerd:
			res.BrokerError = p.Role + ": " + silent
		case layout.Memoryd:
			res.FleetError = p.Role + ": " + silent
		}
	}
	for i, p := range m.Status.Peers {
		roles[i] = wire.RoleState{Role: p.Role, Version: "unknown", Detail: silent}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, set := probe(ctx, p, silent)
			mu.Lock()
			defer mu.Unlock()
			roles[i] = r
			set(res)
		}()
	}
	if m.Status.Props != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := m.Status.Props(ctx)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				res.SlotContext, res.Server = n, "llama-server answers through inferproxy"
			case ctx.Err() != nil:
				res.Server = "llama-server " + silent
			default:
				res.Server = "llama-server: " + err.Error()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if at, err := audit.ReadAnchorTime(layout.AnchorTimeFile(m.State)); err == nil && !at.IsZero() {
		st.AnchorAt = at.Format(time.RFC3339)
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	st.Roles = append(st.Roles, roles...)
	st.SlotContext, st.Server = res.SlotContext, res.Server
	st.Approvals, st.Allowances, st.BrokerError = res.Approvals, res.Allowances, res.BrokerError
	st.Fleet, st.FleetError = res.Fleet, res.FleetError
}

// probe asks one peer; set writes what it learnt into the answer (under
// the caller's lock).
func probe(ctx context.Context, p StatusPeer, silent string) (wire.RoleState, func(*wire.SessionStatus)) {
	r := wire.RoleState{Role: p.Role, Version: "unknown"}
	down := func(err error) (wire.RoleState, func(*wire.SessionStatus)) {
		r.Detail = "down: " + err.Error()
		if ctx.Err() != nil {
			r.Detail = silent
		}
		msg := p.Role + ": " + r.Detail
		return r, func(st *wire.SessionStatus) {
			switch p.Role {
			case layout.Brokerd:
				st.BrokerError = msg
			case layout.Memoryd:
				st.FleetError = msg
			}
		}
	}
	switch p.Role {
	case layout.Brokerd:
		b, err := rpc.Ask[*wire.BrokerStatus](ctx, &wire.Broker, p.Socket, &wire.BrokerStatusQuery{})
		if err != nil {
			return down(err)
		}
		r.Up, r.Version, r.Detail = true, b.Version, "answers on "+wire.Broker.Name
		return r, func(st *wire.SessionStatus) {
			st.BrokerError, st.Approvals, st.Allowances = "", b.Approvals, b.Allowances
		}
	case layout.Memoryd:
		f, err := rpc.Ask[*wire.FleetState](ctx, &wire.Memory, p.Socket, &wire.FleetStatus{})
		if err != nil {
			return down(err)
		}
		r.Up, r.Version, r.Detail = true, f.Version, "answers on "+wire.Memory.Name
		return r, func(st *wire.SessionStatus) { st.FleetError, st.Fleet = "", f }
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", p.Socket)
	if err != nil {
		return down(err)
	}
	defer c.Close()
	r.Up, r.Detail = true, "accepts"
	if uc, ok := c.(*net.UnixConn); ok {
		r.Version = procinfo.VersionOf(procinfo.PeerPID(uc))
	}
	return r, func(*wire.SessionStatus) {}
}
