package broker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// The audit log records a call's arguments, except what a write_file
// would write: that is session data, possibly secret, and the audit log
// must not become a copy of it. It is recorded by SHA-256 and size, and
// so are a consult's question and context (the consult log holds them).

func auditArgs(a toolargs.Args, raw json.RawMessage) json.RawMessage {
	if w, ok := a.(toolargs.WriteFile); ok {
		sum := sha256.Sum256([]byte(w.Content))
		b, _ := json.Marshal(struct {
			Path          string `json:"path"`
			ContentSHA256 string `json:"content_sha256"`
			ContentBytes  int    `json:"content_bytes"`
		}{w.Path.String(), hex.EncodeToString(sum[:]), len(w.Content)})
		return b
	}
	if c, ok := a.(toolargs.Consult); ok {
		// The payload itself is in the consult log, in full, linked to
		// this record by its hash.
		q, x := sha256.Sum256([]byte(c.Question)), sha256.Sum256([]byte(c.Context))
		b, _ := json.Marshal(struct {
			QuestionSHA256 string `json:"question_sha256"`
			QuestionBytes  int    `json:"question_bytes"`
			ContextSHA256  string `json:"context_sha256"`
			ContextBytes   int    `json:"context_bytes"`
		}{hex.EncodeToString(q[:]), len(c.Question), hex.EncodeToString(x[:]), len(c.Context)})
		return b
	}
	if a != nil {
		if b, err := a.MarshalJSON(); err == nil {
			return b
		}
	}
	// Arguments that did not parse: kept as a JSON string, so that even
	// invalid JSON (duplicate keys, bad UTF-8) is recorded, not lost.
	b, _ := json.Marshal(string(raw))
	return b
}

func grantRef(g *policy.GrantRef) *audit.GrantRef {
	if g == nil || g.ID == "" {
		return nil
	}
	return &audit.GrantRef{ID: g.ID, SHA256: g.SHA256}
}

// denialRecord maps a policy denial to the audit record's reason.
func denialRecord(d *policy.Denial, raw json.RawMessage) audit.DecisionRecord {
	r := audit.DecisionRecord{Tool: d.Tool, Arguments: auditArgs(nil, raw), Verdict: audit.Verdict{Outcome: audit.Denied, Detail: d.Detail}}
	if cd := d.ConsultDetail(); cd != "" {
		r.Detail = cd // the consult rule that refused it (the reason is no_grant)
	}
	switch d.Reason {
	case policy.GrantsInvalid:
		r.Reason = audit.GrantsInvalid
	case policy.InvalidArguments:
		r.Reason = audit.InvalidArguments
	case policy.DeniedByGrant:
		r.Reason, r.Grant = audit.DenyGrant, grantRef(d.Grant)
	case policy.MCPUnpinned:
		r.Reason = audit.MCPUnpinned
	case policy.UnknownTool:
		r.Reason, r.Detail = audit.NoGrant, "no tool of that name can be granted"
	default:
		r.Reason = audit.NoGrant
	}
	r.Tool = toolOf(r.Tool)
	return r
}
