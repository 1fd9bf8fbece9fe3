package layout

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// The files inside the table's directories that more than their writer
// names: each role, bxctl and the tests find them here, never by a path
// of their own (checks/arch StatePaths).

// SessionDir is session id's directory of logs in state directory state.
func SessionDir(state, id string) string { return filepath.Join(Sessions.In(state), id) }

// EpochLog is the log of epoch in a session's directory dir (SessionDir):
// <epoch>.jsonl, the one spelling of a session's epoch file.
func EpochLog(dir string, epoch int64) string { return filepath.Join(dir, epochName(epoch, ".jsonl")) }

// EpochBaseline is epoch's baseline snapshot in a session's directory.
func EpochBaseline(dir string, epoch int64) string {
	return filepath.Join(dir, epochName(epoch, ".baseline.json"))
}

// EpochRel is epoch's log of session id relative to the state
// directory, slash-separated, as messages to the owner name it.
func EpochRel(id string, epoch int64) string {
	return fmt.Sprintf("%s/%s/%s", Sessions.Path, id, epochName(epoch, ".jsonl"))
}

func epochName(epoch int64, ext string) string { return strconv.FormatInt(epoch, 10) + ext }

// BrokerSessions holds brokerd's per-session state files (rebuildable
// from the audit log).
func BrokerSessions(state string) string { return filepath.Join(Broker.In(state), "sessions") }

// BrokerScratch holds brokerd's per-call scratch (the runner's work
// directory).
func BrokerScratch(state string) string { return filepath.Join(Broker.In(state), "run") }

// RecallIndex is memoryd's recall index (disposable).
func RecallIndex(state string) string { return filepath.Join(Index.In(state), "recall.db") }

// FleetOutbox is memoryd's fleet memory outbox and its record of what
// Honcho holds.
func FleetOutbox(state string) string { return filepath.Join(Index.In(state), "fleet.db") }

// LoopJobs is loopd's record of the owner's jobs' runs.
func LoopJobs(state string) string { return filepath.Join(LoopState.In(state), "jobs.json") }

// GatewayJobs is gatewayd's record of the newest job report it posted.
func GatewayJobs(state string) string { return filepath.Join(Gateway.In(state), "jobs.json") }

// ConfigGlob is the pattern of every role's config in state (ConfigPath).
func ConfigGlob(state string) string { return filepath.Join(Config.In(state), "*.toml") }
