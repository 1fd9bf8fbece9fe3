package wire

import "wntrmute.dev/boxmaker/pkg/text/dataclass"

// # gate.sock
//
// brokerd listens on gate.sock for memoryd alone. memoryd sends one
// [SessionQuery] per connection when it learns a turn has ended, and
// brokerd answers one [SessionState]: the session's taint and untrusted
// flag as its ledger holds them, and nothing else. It is the clean-turn
// gate of fleet memory (decision P23): a turn is filed in the trusted
// Honcho workspace only if brokerd says the session is still clean.
// Both messages are in [BrokerMessages], so broker.sock and admin.sock
// refuse them (forbidden) and gate.sock refuses theirs: the socket
// memoryd may reach can neither run a tool nor answer an approval.

// SessionQuery asks brokerd for a session's state.
type SessionQuery struct {
	Session string `json:"session"`
}

// SessionState answers SessionQuery. A session brokerd has never seen
// is fresh: private and trusted. An unreadable state file is answered
// as secret and untrusted (the ledger's worst), never as clean.
type SessionState struct {
	Session   string          `json:"session"`
	Taint     dataclass.Class `json:"taint"`
	Untrusted bool            `json:"untrusted"`
}

// GateFrameMax caps gate.sock's frames: one session id and its state.
const GateFrameMax = 1 << 10
