package honcho

import (
	"context"
	"errors"
	"net/http"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
)

// # What Honcho lets a client delete
//
// Read from plastic-labs/honcho (commit ddbb90e, 2026-08-20):
//   - a message cannot be deleted: src/routers/messages.py has no DELETE
//     route, and its PUT (update_message, line 363) replaces only the
//     message's metadata, never its content or what was derived from it;
//   - a session can: DELETE /v3/workspaces/{w}/sessions/{s}
//     (src/routers/sessions.py delete_session, line 378) marks it inactive
//     at once and answers 202; a queued job then hard-deletes its
//     messages, their embeddings and the session's documents (the
//     conclusions derived in it) (src/crud/session.py delete_session, line
//     553). Until the job runs, an inactive session refuses every
//     get-or-create, so no message can be added to it (crud/session.py
//     line 236), and a second delete answers 404;
//   - a conclusion can, by its id (src/routers/conclusions.py line 137),
//     but Honcho records no link from a conclusion to the message it came
//     from, so memoryd cannot tell which one to delete;
//   - nothing in delete_session touches a peer card or a peer's
//     representation (src/crud/peer_card.py), so what Honcho summarised
//     about a peer from the session can outlive it.
//
// So the smallest thing memoryd can remove is the Honcho session that
// holds the message.

// DeleteSession asks Honcho to delete session s of workspace w: 202 when
// it was marked for deletion, and a session Honcho no longer has (404:
// deleted before, or never written) counts as deleted.
func (c *Client) DeleteSession(ctx context.Context, w, s honchoconf.ID) error {
	const op = "delete honcho session"
	if err := need(op, w, s); err != nil {
		return err
	}
	_, _, err := c.do(ctx, op, http.MethodDelete, ws(w, "sessions", s.String()), nil, http.StatusAccepted)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
