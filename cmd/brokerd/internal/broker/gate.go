package broker

import (
	"context"
	"errors"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/ledger"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// listenGate listens on gate.sock, in the layout table's directory (a
// config made without one, a test's, serves none).
func (b *Broker) listenGate() (*sockets.Listener, error) {
	if b.cfg.GateSocketDir == "" {
		b.log.Warn("no gate.sock directory (a config made without one): memoryd cannot ask a session's state, so it writes no turn to Honcho; see docs/runbook.md#fleet-gate-unanswered")
		return nil, nil
	}
	return rpc.Listen(&wire.Gate, sockets.Config{Dir: b.cfg.GateSocketDir, AllowUIDs: b.cfg.GateAllowUIDs, Logger: b.log})
}

// gateServer is gate.sock: the session's state, read under the ledger
// lock, and nothing else. A state brokerd cannot read is answered as
// the ledger's worst (secret, untrusted), never refused: memoryd then
// files the turn untrusted, or writes nothing.
func (b *Broker) gateServer() *rpc.Server {
	return rpc.NewServer(&wire.Gate, b.log, rpc.On(func(_ context.Context, peer sockets.Peer, q *wire.SessionQuery) strict.Variant {
		if err := wire.CheckSessionID(q.Session); err != nil {
			return &wire.Error{Op: "session_query", Kind: wire.Invalid, Msg: err.Error()}
		}
		s, err := b.ledger.Session(q.Session)
		var unreadable *ledger.UnreadableError
		switch {
		case errors.As(err, &unreadable):
			b.log.Warn("gate: session state unreadable, answered as secret and untrusted", "session", q.Session, "uid", peer.UID())
		case err != nil:
			b.log.Warn("gate: session state unavailable", "session", q.Session, "err", err.Error())
			return &wire.Error{Op: "session_query", Kind: wire.Unavailable, Msg: "brokerd cannot read session state now"}
		}
		return &wire.SessionState{Session: q.Session, Taint: s.Taint, Untrusted: s.Untrusted}
	}))
}
