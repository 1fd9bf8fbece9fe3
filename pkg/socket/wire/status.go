package wire

// StatusQuery asks loopd how one session and the stack look (gatewayd's
// !status in a thread): loopd answers [SessionStatus] with what it sees
// and what the roles it already talks to tell it (brokerd's
// [BrokerStatus], memoryd's [FleetState], llama-server's /props through
// inferproxy) and the anchor time `bxctl audit anchor` wrote in
// metrics/. It changes nothing.
type StatusQuery struct {
	Session string `json:"session"`
}

// Tag implements strict.Variant.
func (*StatusQuery) Tag() string { return "status_query" }

// SessionStatus answers StatusQuery: the model and its slot, the
// session's epoch, context and last turn's cache reuse, today's prefill
// time over every session, whether a turn runs or waits for an approval,
// the roles loopd talks to, and the jobs' next runs.
type SessionStatus struct {
	Session     string `json:"session"`
	Model       string `json:"model"`
	Slot        int    `json:"slot"`
	SlotContext int    `json:"slot_context"` // tokens per slot, as the self-test read it
	Epoch       int64  `json:"epoch"`
	Compactions int64  `json:"compactions"`
	Turn        int64  `json:"turn"` // the last turn with a completion
	// Running says a turn runs; Approval that it waits for the owner.
	Running  bool `json:"running"`
	Approval bool `json:"approval"`
	// ContextTokens is the session's context after its last completion;
	// Reread the tokens re-read beyond the new suffix in its last turn,
	// Cached those reused.
	ContextTokens  int         `json:"context_tokens"`
	Reread         int         `json:"reread"`
	Cached         int         `json:"cached"`
	TodayPrefillMS int64       `json:"today_prefill_ms"`
	Roles          []RoleState `json:"roles"`
	Jobs           []JobNext   `json:"jobs"`
	// Version is loopd's; Server llama-server's answer to /props through
	// inferproxy, or why there is none.
	Version string `json:"version"`
	Server  string `json:"server"`
	// Approvals and Allowances are brokerd's (BrokerError why there are
	// none: brokerd down or silent past the bound).
	Approvals   []ApprovalBrief  `json:"approvals"`
	Allowances  []AllowanceBrief `json:"allowances"`
	BrokerError string           `json:"broker_error"`
	// Fleet is memoryd's outbox (nil with FleetError why).
	Fleet      *FleetState `json:"fleet"`
	FleetError string      `json:"fleet_error"`
	// AnchorAt is when the owner last anchored the audit log (RFC 3339),
	// as bxctl audit anchor wrote it into metrics/; "" for none.
	AnchorAt string `json:"anchor_at"`
}

// Tag implements strict.Variant.
func (*SessionStatus) Tag() string { return "session_status" }

// RoleState is whether a role answered loopd: its socket accepted the
// connection (and, for brokerd and memoryd, its status came back within
// the bound). Version is the role's own word or its binary's; Detail why
// it is down.
type RoleState struct {
	Role    string `json:"role"`
	Up      bool   `json:"up"`
	Version string `json:"version"`
	Detail  string `json:"detail"`
}

// BrokerStatusQuery asks brokerd, on broker.sock, for what !status shows
// of it: read-only, and never an approval's code or arguments.
type BrokerStatusQuery struct{}

// Tag implements strict.Variant.
func (*BrokerStatusQuery) Tag() string { return "broker_status_query" }

// BrokerStatus answers BrokerStatusQuery: brokerd's version, the pending
// approvals and the session allowances in force, each by id, session,
// tool and expiry only.
type BrokerStatus struct {
	Version    string           `json:"version"`
	Approvals  []ApprovalBrief  `json:"approvals"`
	Allowances []AllowanceBrief `json:"allowances"`
}

// Tag implements strict.Variant.
func (*BrokerStatus) Tag() string { return "broker_status" }

// ApprovalBrief is a pending approval as a status shows it.
type ApprovalBrief struct {
	ID      int64  `json:"id"`
	Session string `json:"session"`
	Tool    string `json:"tool"`
	Expires string `json:"expires"`
}

// AllowanceBrief is a session allowance as a status shows it.
type AllowanceBrief struct {
	ID      int64  `json:"id"`
	Session string `json:"session"`
	Tool    string `json:"tool"`
	Scope   string `json:"scope"`
	Expires string `json:"expires"`
}

// JobNext is a job's next run (RFC 3339, "" for none).
type JobNext struct {
	Name string `json:"name"`
	Next string `json:"next"`
}
