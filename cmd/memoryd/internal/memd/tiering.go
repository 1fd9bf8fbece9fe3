package memd

import (
	"context"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// countIdentity counts a recall against the identity entries (package
// recall's rule); a failure is logged and never fails the recall.
func (m *Memd) countIdentity(query string) {
	files, err := m.store.IdentityEntries()
	if err == nil {
		err = m.index.CountIdentity(query, files)
	}
	if err != nil {
		m.log.Warn("identity recall counts not kept", "err", err.Error())
	}
}

// tiering answers loopd's tiering job: the agent-written identity
// files' entries with their recall counts. It changes nothing; the job's
// proposal comes back, if at all, as a memory tool call through brokerd.
func (m *Memd) tiering(_ context.Context, _ sockets.Peer, r *wire.TieringRequest) strict.Variant {
	files, err := m.store.IdentityEntries()
	if err != nil {
		m.log.Error("tiering", "session", r.Session, "err", err.Error())
		return &wire.Error{Op: "tiering", Kind: wire.Unavailable, Msg: "the identity files could not be read; see docs/runbook.md#memoryd-unavailable"}
	}
	out := &wire.TieringStats{Files: []wire.TierFile{}}
	for _, f := range store.Tiered {
		hits, err := m.index.IdentityHits(f, files[f])
		if err != nil {
			m.log.Error("tiering", "session", r.Session, "err", err.Error())
			return &wire.Error{Op: "tiering", Kind: wire.Unavailable, Msg: "the recall counts could not be read; see docs/runbook.md#memoryd-unavailable"}
		}
		tf := wire.TierFile{File: f, Entries: []wire.TierEntry{}}
		for i, e := range files[f] {
			tf.Entries = append(tf.Entries, wire.TierEntry{Text: e, Hits: hits[i].Hits, LastFound: hits[i].LastFound})
		}
		out.Files = append(out.Files, tf)
	}
	return out
}
