package memd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/sessionlog"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// forget answers `bxctl memory forget [--undo] ID`: a tombstone (or its
// undo) in notes.md, journalled; the index drops the entry at once and
// every rebuild keeps it out; the receipt says what is kept and where.
func (m *Memd) forget(ctx context.Context, _ sockets.Peer, r *wire.MemoryForget) strict.Variant {
	msg, err := m.Forget(ctx, r.ID, r.Undo)
	var rr *store.Refused
	switch {
	case errors.As(err, &rr):
		return &wire.Error{Op: "forget", Kind: wire.Denied, Msg: rr.Msg}
	case err != nil:
		m.log.Error("forget", "id", r.ID, "err", err.Error())
		return &wire.Error{Op: "forget", Kind: wire.Internal, Msg: "the forget failed: " + err.Error() + "; see docs/runbook.md#memoryd-unavailable"}
	}
	m.log.Info("forget", "id", r.ID, "undo", r.Undo, "msg", msg)
	return &wire.MemoryDone{Msg: msg}
}

// Forget tombstones id (or with undo takes the tombstone back) and
// returns the receipt.
func (m *Memd) Forget(ctx context.Context, id string, undo bool) (string, error) {
	if s, e, t, rec, ok := store.ParseRecordKey(id); ok {
		if err := m.recordExists(s, e, t, rec); err != nil {
			return "", err
		}
	}
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	n, err := m.store.Forget(id, undo)
	if err != nil {
		return "", err
	}
	journal := fmt.Sprintf("journalled as %s %s at %s", n.Kind, n.ID, n.At)
	if undo {
		if err := m.index.Unforget(id); err != nil {
			return "", err
		}
		if _, err := m.Rebuild(); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s is remembered again: the tombstone is taken back (%s), and recall finds it again; fleet memory is not restored (what was deleted from Honcho stays deleted; bxctl memory resync files the session's turns again)", id, journal), nil
	}
	k, err := m.index.Forget(id)
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("forgot %s: tombstone %s (%s); %d documents left the recall index, and bxctl reindex keeps it out; nothing was deleted from memory/ or sessions/ (append-only: the text stays on disk, out of recall); undo: bxctl memory forget --undo %s",
		id, n.ID, journal, k, id)
	return msg + "; " + m.forgetFleet(ctx, id), nil
}

// recordExists checks that a session record key names a line of a log.
func (m *Memd) recordExists(s string, epoch, turn int64, rec int) error {
	path := filepath.Join(m.cfg.StateDir, "sessions", s, fmt.Sprintf("%d.jsonl", epoch))
	found := false
	err := sessionlog.Scan(path, func(line int, r sessionlog.Record, _ sessionlog.Trust) error {
		found = found || (line == rec && r.TurnOf() == turn)
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return &store.Refused{Msg: fmt.Sprintf("forget: sessions/%s/%d.jsonl has no record %d in turn %d; see docs/runbook.md#memory-forget-refused", s, epoch, rec, turn)}
	}
	return nil
}

// forgetFleet is what the forget did in fleet memory (Honcho).
func (m *Memd) forgetFleet(_ context.Context, _ string) string {
	if m.fleet == nil {
		return "fleet memory (Honcho) is not configured, so nothing was held there"
	}
	return "fleet memory: not yet forgotten in Honcho"
}
