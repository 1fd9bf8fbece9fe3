package wire

// StatusQuery asks loopd how one session and the stack look from where
// loopd stands (gatewayd's !status in a thread; bxctl status reads more
// than loopd can). loopd answers [SessionStatus]. It changes nothing.
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
}

// Tag implements strict.Variant.
func (*SessionStatus) Tag() string { return "session_status" }

// RoleState is whether a role's socket accepted loopd's connection.
type RoleState struct {
	Role string `json:"role"`
	Up   bool   `json:"up"`
}

// JobNext is a job's next run (RFC 3339, "" for none).
type JobNext struct {
	Name string `json:"name"`
	Next string `json:"next"`
}
