package wire

// # Memory tiering, on memory.sock
//
// loopd's built-in tiering job sends [TieringRequest] before its run;
// memoryd answers [TieringStats]: each agent-written identity file's
// entries, in file order, with how often recall found each and when it
// last did. loopd puts them in the run's prompt; the run's proposal is
// an ordinary memory tool call (consolidate), decided by brokerd and
// journalled by memoryd like every other write.

// TieringRequest asks for the identity entries' recall counts. loopd to
// memoryd.
type TieringRequest struct {
	Session string `json:"session"` // the run's session, for memoryd's log
}

// Tag implements strict.Variant.
func (*TieringRequest) Tag() string { return "tiering_request" }

// TierEntry is one identity entry: its text, the recalls that found it
// and the last time one did (RFC 3339, "" if never).
type TierEntry struct {
	Text      string `json:"text"`
	Hits      int64  `json:"hits"`
	LastFound string `json:"last_found"`
}

// TierFile is one identity file's entries, in file order (consolidate's
// plan has one step per entry, in this order).
type TierFile struct {
	File    string      `json:"file"` // "memory.md" or "user.md"
	Entries []TierEntry `json:"entries"`
}

// TieringStats answers TieringRequest.
type TieringStats struct {
	Files []TierFile `json:"files"`
}

// Tag implements strict.Variant.
func (*TieringStats) Tag() string { return "tiering_stats" }
