package wire

// ConsultPending says a consult was allowed, its payload logged and its
// request sent: the answer comes by Expires (RFC 3339), the consult's
// total bound, or the call fails then. A consult may take minutes, so
// loopd waits for it past broker.sock's usual deadline; nothing else
// waits (docs/decisions.md, 2026-12-01: the turn suspends, as for an
// approval, and the inference slot is free meanwhile).
type ConsultPending struct {
	ID      int64  `json:"id"` // the decision's audit seq
	Expires string `json:"expires"`
}

// Tag implements strict.Variant.
func (*ConsultPending) Tag() string { return "consult_pending" }
