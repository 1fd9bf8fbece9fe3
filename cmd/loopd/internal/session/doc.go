// Package session is loopd's session log: sessions/<id>/<epoch>.jsonl and
// the baseline snapshot beside it.
//
// Invariants:
//   - the log is append-only, written only through pkg/logs/jsonl, one typed
//     record per line, decoded strictly on replay;
//   - every assistant message is stored exactly as the server returned it
//     (content, reasoning_content, tool_calls) and replayed unchanged;
//   - tool results are capped when first appended and never trimmed later;
//   - [sessionlog.Replay] is a pure function of the baseline snapshot and
//     the records: the request for the next model call is rebuilt from the
//     files alone,
//     byte for byte, so a restarted loopd sends what a running one would;
//     [Session.Messages], which the turn engine uses, equals it while
//     costing only the records appended since the last call;
//   - a torn or undecodable log is refused, never appended to, until the
//     owner acts (docs/runbook.md#torn-log, #session-log-damaged);
//   - a session is a chain of epochs (epoch.go): only the current one is
//     ever written; an epoch after 0 starts with a head record that names
//     the hash of the previous epoch's last line and carries the
//     session's trust, which never goes down; a change is committed by
//     one rename, so a crash leaves the old epoch current or the new one
//     complete.
//
// Its records, their replay and the tool result's status are
// pkg/logs/sessionlog's, used directly (memoryd and bxctl read the same
// logs with them); this package owns only the files: appending, the
// epoch chain, the baseline.
package session
