// Package honcho is a test double of Honcho v3, the owner's fleet memory
// service, for memoryd's client (cmd/memoryd/internal/honcho, whose
// conformance suite runs against this fake always and against a real
// Honcho when BOXMAKER_HONCHO_URL is set), and for the tests of memoryd's
// fleet and memd packages and the whole-stack tests (checks/stack), which
// read what it recorded. It is not a memory service and must never
// be linked into a role (checks/arch refuses a product package importing
// checks/).
//
// # Invariant
//
// Every answer copies the wire of plastic-labs/honcho at ddbb90e3
// (version 3.0.12), read from its source. Each behaviour carries a
// comment citing the upstream file and line or function it copies (paths
// under src/ of that commit). Where upstream
// could not be read to the end (a database query, a model call) the
// comment says "fake:" and what was chosen instead. Every request, in
// order, is kept for [Server.Requests]: method, path, query, body and
// whether it carried the right key (never the key itself).
//
// # What it models
//
//   - GET /health; POST /v3/workspaces (get-or-create), .../peers,
//     .../sessions, .../sessions/{s}/peers, .../sessions/{s}/messages
//     (batches of 1 to 100), .../sessions/{s}/messages/list (paginated),
//     the three search routes and .../peers/{p}/chat (non-streaming);
//     DELETE .../sessions/{s} (202; the session is inactive at once, its
//     messages kept until [Server.RunDeletions] runs Honcho's queued
//     deletion job: delete.go);
//   - the key: with [Options.Key] set, every /v3 route wants
//     "Authorization: Bearer <key>" (the fake compares the key as opaque
//     text; Honcho verifies a JWT);
//   - errors: {"detail": "..."} for Honcho's exceptions and FastAPI's
//     {"detail": [{"type", "loc", "msg", "input", "ctx"}]} for body
//     validation, with upstream's statuses;
//   - search is a case-insensitive substring match in creation order
//     (fake: Honcho's is a hybrid semantic search); token_count is the
//     content's characters divided by four, rounded up (fake: Honcho uses
//     tiktoken's o200k_base); the dialectic answers what [Options.Chat]
//     returns (fake: Honcho asks a model).
//
// Knobs for failure tests: [Server.SetDelay] and [Server.SetFailure].
package honcho
