package memd

import (
	"context"
	"errors"
	"fmt"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/fleet"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// forget answers `bxctl memory forget [--undo] ID`: a tombstone (or its
// undo) in notes.md, journalled; the index drops the entry at once and
// every rebuild keeps it out; the receipt says what is kept and where.
func (m *Memd) forget(ctx context.Context, _ sockets.Peer, r *wire.MemoryForget) strict.Variant {
	msg, err := m.Forget(ctx, r.ID, r.Undo, "")
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
// returns the receipt. by says how the owner asked, for the tombstone
// ("" for bxctl).
func (m *Memd) Forget(ctx context.Context, id string, undo bool, by string) (string, error) {
	if s, e, t, rec, ok := store.ParseRecordKey(id); ok {
		if err := m.recordExists(s, e, t, rec); err != nil {
			return "", err
		}
	}
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	n, err := m.store.Forget(id, undo, by)
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
		m.setFleetForgotten()
		return fmt.Sprintf("%s is remembered again: the tombstone is taken back (%s), and recall finds it again; fleet memory is not restored (what was deleted from Honcho stays deleted; bxctl memory resync files the session's turns again)", id, journal), nil
	}
	k, err := m.index.Forget(id)
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("forgot %s: tombstone %s (%s); %d documents left the recall index, and bxctl reindex keeps it out; nothing was deleted from memory/ or sessions/ (append-only: the text stays on disk, out of recall); undo: bxctl memory forget --undo %s",
		id, n.ID, journal, k, id)
	return msg + "; " + m.forgetFleet(ctx, id, n.ID), nil
}

// recordExists checks that a session record key names a line of a log.
func (m *Memd) recordExists(s string, epoch, turn int64, rec int) error {
	path := layout.EpochLog(layout.SessionDir(m.cfg.StateDir, s), epoch)
	found := false
	err := sessionlog.Scan(path, func(line int, r sessionlog.Record, _ sessionlog.Trust) error {
		found = found || (line == rec && r.TurnOf() == turn)
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return &store.Refused{Msg: fmt.Sprintf("forget: %s has no record %d in turn %d; see docs/runbook.md#memory-forget-refused", layout.EpochRel(s, epoch), rec, turn)}
	}
	return nil
}

// fleetID is the id fleet memory files an entry under (package fleet's
// MessageID, or note-<id> for an entry consolidate moved), "" if none.
func fleetID(key string) string {
	if store.NoteID.MatchString(key) {
		return "note-" + key
	}
	if s, e, _, rec, ok := store.ParseRecordKey(key); ok {
		return fleet.MessageID(s, e, rec)
	}
	return ""
}

// setFleetForgotten keeps every forgotten entry out of fleet memory's
// filings (catch-up, resync, a rebuilt outbox).
func (m *Memd) setFleetForgotten() {
	if m.fleet == nil {
		return
	}
	ids := map[string]bool{}
	for k := range m.store.Forgotten() {
		if id := fleetID(k); id != "" {
			ids[id] = true
		}
	}
	m.fleet.SetForgotten(ids)
}

// forgetFleet removes the entry from fleet memory, as far as Honcho's API
// allows, and says what it did and what Honcho may still hold.
func (m *Memd) forgetFleet(ctx context.Context, key, tomb string) string {
	if m.fleet == nil {
		return "fleet memory (Honcho) is not configured, so nothing of it was there"
	}
	m.setFleetForgotten()
	fg, err := m.fleet.Forget(ctx, fleetID(key), tomb)
	switch {
	case err != nil:
		m.log.Error("fleet forget", "id", key, "err", err.Error())
		return "fleet memory: the outbox could not record the forget (" + err.Error() + "), but the entry is never filed to Honcho again; see docs/runbook.md#fleet-outbox-stuck"
	case !fg.Filed:
		return "fleet memory: memoryd never filed it to Honcho (only a turn's speaker messages and final reply, and entries consolidate moved, go there), and it never will"
	}
	msg := fmt.Sprintf("fleet memory: Honcho cannot delete one message (its messages API has no delete), so memoryd asked it to delete Honcho session %s of workspace %s, the smallest thing it deletes, with that session's conclusions; its other %d messages are filed again under session %s",
		fg.Old, fg.Workspace, fg.Moved, fg.New)
	if fg.Deleted {
		msg += "; Honcho accepted the deletion (202) and hard-deletes the messages by a queued job, so search may find them until that runs (recall drops them)"
	} else {
		msg += "; Honcho did not answer the deletion (" + fg.Wait + "): it stays queued in the outbox and is retried before any message is sent (bxctl memory shows the last error); see docs/runbook.md#fleet-outbox-stuck"
	}
	return msg + "; Honcho may still hold what it derived about the peers from it (peer cards and representations, which a session's deletion does not touch), and whatever its operator backed up; see docs/decisions.md (forget in fleet memory)"
}
