// Package fleet is memoryd's fleet memory: finished turns written to the
// agent's two Honcho workspaces through a durable outbox, and recall and
// ask_memory answered from Honcho beside the local index (decision P23,
// the brief's Memory items 4, 5, 6 and 8).
//
// Invariants:
//   - a turn goes to the trusted workspace only if brokerd's gate.sock
//     (its listener checked by SO_PEERCRED before anything is sent)
//     answered in time that the session is clean and loopd's labels in
//     the session log agree; a late answer, or disagreement, files it
//     untrusted, never the reverse ([File]); a turn brokerd has not
//     answered for is filed nowhere (never by loopd's labels alone): it
//     waits, marked late if its answer was due, for brokerd's answer;
//   - a secret turn, or one above the configured class, is never
//     written; of a written turn only the speaker's messages and the
//     agent's final reply are: never a tool call, tool result or
//     reasoning ([ReadTurns]);
//   - every message is committed to the outbox before it is sent and
//     carries an id derived from its session, epoch and record; one
//     whose send may have reached Honcho, or that a rebuilt outbox or a
//     resync queued, is looked for there by that id before it is sent
//     again, so Honcho holds each message once;
//   - Honcho is never waited on beyond a bound by a turn or a tool call,
//     and no error of Honcho's stops memoryd: recall answers from the
//     local index and says fleet memory was not reached;
//   - every hit read from an untrusted workspace (the agent's own
//     untrusted one included) is memory-tainted, and ask_memory's
//     answer carries the most restrictive label of the workspaces read.
package fleet
