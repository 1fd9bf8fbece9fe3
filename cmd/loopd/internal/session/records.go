// Package session is loopd's session log: sessions/<id>/<epoch>.jsonl and
// the baseline snapshot beside it.
//
// Invariants:
//   - the log is append-only, written only through pkg/logs/jsonl, one typed
//     record per line, decoded strictly on replay;
//   - every assistant message is stored exactly as the server returned it
//     (content, reasoning_content, tool_calls) and replayed unchanged;
//   - tool results are capped when first appended and never trimmed later;
//   - [Replay] is a pure function of the baseline snapshot and the records:
//     the request for the next model call is rebuilt from the files alone,
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
package session

import "wntrmute.dev/boxmaker/pkg/logs/sessionlog"

// The records are pkg/logs/sessionlog's, shared with memoryd, which indexes
// the same logs.
type (
	User       = sessionlog.User
	Assistant  = sessionlog.Assistant
	ToolResult = sessionlog.ToolResult
	Usage      = sessionlog.Usage
	CacheLoss  = sessionlog.CacheLoss
	Approval   = sessionlog.Approval
	Stopped    = sessionlog.Stopped
	TurnEnd    = sessionlog.TurnEnd
	Record     = sessionlog.Record
)

// Records is the union of every record type.
var Records = sessionlog.Records

// Baseline is the fixed head of every request in an epoch.
type Baseline = sessionlog.Baseline

// Replay and ToolMessage are pkg/logs/sessionlog's: the request is a pure
// function of the files, whoever reads them.
var (
	Replay      = sessionlog.Replay
	ToolMessage = sessionlog.ToolMessage
)
