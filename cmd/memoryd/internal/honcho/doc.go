// Package honcho is memoryd's client for Honcho v3, the owner's fleet
// memory service, over net/http and the standard library (no SDK). The
// wire is plastic-labs/honcho's at commit ddbb90e3 (version 3.0.12), read
// from its source: the routes mounted under /v3 (src/main.py:178-185),
// the shapes (src/schemas/api.py; the id pattern at line 45), the errors
// (src/exceptions.py:11); each call here names the upstream function it
// follows. checks/fake/honcho is its double, and conformance_test.go runs
// one suite against both.
//
// Package fleet is its caller for everything but [Open]: the outbox, the
// clean-turn gate and the recall merge live there; memd opens the client
// and hands it to fleet.
//
// Invariants:
//   - every request carries a deadline ([honchoconf.Settings.Timeout]) on top of its
//     caller's context, follows no redirect and uses no proxy from the
//     environment: memoryd's one egress is the configured Honcho URL;
//   - every id sent is a [honchoconf.ID], which holds only what Honcho's
//     RESOURCE_NAME_PATTERN accepts (1 to 512 of A-Z a-z 0-9 _ -), and a
//     batch of messages is split at Honcho's limit ([MaxBatch]) with each
//     message's content checked against [MaxContent] before anything is
//     sent;
//   - every 2xx response is decoded with pkg/socket/strict into the exact shape
//     Honcho's schemas serialise: a body that does not decode (an unknown
//     or missing field, a wrong type, trailing data, more than
//     [MaxResponse] bytes) is an error, and the caller gets no data from it;
//   - every other status is an [*APIError] carrying Honcho's "detail"
//     (a string, or FastAPI's list of validation errors, whose echoed
//     "input" is dropped unread so that message text never reaches a log);
//   - the key, if any, is a [secret.Value] and leaves the process only in
//     the Authorization header.
package honcho
