package llama

// SlotState is what a caller remembers about its slot between completions:
// the size of the context the slot held after the previous completion. It is
// a plain value so that loopd can persist it with the session and restore it,
// instead of the client keeping hidden per-slot state.
//
// The zero SlotState means "unknown" (a new session, or a previous
// completion without timings); no gap is computed against it.
type SlotState struct {
	// Total is cache_n + prompt_n + predicted_n of the previous completion.
	Total int
}

// CacheLoss records that the server re-processed more of the prompt than the
// last turn's final token. It is expected on a shared server (another client
// took the slot, the router unloaded the model, the template re-rendered a
// turn differently) and is never an error; loopd logs it.
type CacheLoss struct {
	Tokens    int // PrevTotal - Cached: tokens that had to be processed again
	PrevTotal int // the slot's context after the previous completion
	Cached    int // cache_n of this completion
}

// account fills the cache fields of c from its timings and prev.
//
// A gap of 0 or 1 is normal: the last sampled token is never in the cache
// (reference: "observed live", cache_n 133 against a previous total of 134).
// A negative gap (more cached than the previous total, e.g. another session
// on the same slot had a longer common prefix) is recorded as is and is not a
// loss.
func (c *Completion) account(prev SlotState) {
	if c.Timings == nil {
		return
	}
	c.Slot = SlotState{Total: c.Timings.ContextTokens()}
	if prev.Total <= 0 {
		return
	}
	c.CacheGap = prev.Total - c.Timings.CacheN
	if c.CacheGap > 1 {
		c.CacheLoss = &CacheLoss{Tokens: c.CacheGap, PrevTotal: prev.Total, Cached: c.Timings.CacheN}
	}
}
