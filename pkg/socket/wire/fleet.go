package wire

// Fleet memory's admin messages, on memadmin.sock (bxctl memory and
// bxctl memory resync): they are in [MemorydMessages] like the rest.
// FleetStatus is also taken on memory.sock, read-only, for loopd's
// answer to !status.

// FleetStatus asks for the outbox's state.
type FleetStatus struct{}

// FleetState answers FleetStatus. Configured is false when memoryd.toml
// has no [honcho] table (the rest is then zero).
type FleetState struct {
	Configured bool `json:"configured"`
	Pending    int  `json:"pending"` // messages not yet confirmed by Honcho
	Sent       int  `json:"sent"`
	// Turns and moved entries by filing.
	Trusted   int `json:"trusted"`
	Untrusted int `json:"untrusted"`
	Withheld  int `json:"withheld"`
	// OldestPending is the oldest unsent message's id; LastError why its
	// last send failed; NextTry when it is due (RFC 3339).
	OldestPending string `json:"oldest_pending"`
	LastError     string `json:"last_error"`
	NextTry       string `json:"next_try"`
	// Version is memoryd's (on memory.sock, for loopd's status).
	Version string `json:"version,omitempty"`
}

// FleetResync asks memoryd to make Honcho hold what the session logs and
// notes.md say it should: every turn and moved entry is filed again if
// it is not, and every message is sent again unless Honcho holds it.
type FleetResync struct{}

// Tags.
func (*FleetStatus) Tag() string { return "fleet_status" }
func (*FleetState) Tag() string  { return "fleet_state" }
func (*FleetResync) Tag() string { return "fleet_resync" }
