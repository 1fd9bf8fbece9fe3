package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/model/consult"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Endpoint is where consult calls go and how long one may take: brokerd's
// [consult] table, checked when brokerd.toml is loaded.
type Endpoint struct {
	// Base is the endpoint's URL without "/chat/completions": https, no
	// port, no query ("https://api.z.ai/api/paas/v4").
	Base             string
	Host             hostrule.Name
	TemperatureMilli int   // at most consult.MaxTemperatureMilli
	IdleMS           int64 // the liveness limit
	TotalMS          int64 // the total bound
}

// ConsultCall is an allowed consult's outbound request: the exact bytes
// the remote model will receive, built here from the call's two
// arguments, the winning grant's model and the endpoint, and nothing
// else. brokerd logs it before the container runs; the runner hands it
// to the toolkit, which sends it unchanged.
type ConsultCall struct {
	toolargs.ConsultCall
	Model string
}

// The consult reasons (rule 9). Append-only, like the others.
const (
	ConsultUnconfigured Reason = "consult_unconfigured" // brokerd.toml has no [consult]
	ConsultSecret       Reason = "consult_secret"       // the session holds secret data, which never leaves
	ConsultHost         Reason = "consult_host"         // no consult grant names the endpoint's host
	ConsultAboveClass   Reason = "consult_above_class"  // the session's taint is above every such grant's max_taint
	ConsultUntrusted    Reason = "consult_untrusted"    // an untrusted session, and no grant says untrusted_sessions
	ConsultIdentity     Reason = "consult_identity"     // no such grant lets the identity files (in every prompt) leave
	ConsultRecalled     Reason = "consult_recalled"     // the session holds recalled memory, and no such grant says all_may_leave
)

// consultRules are each consult reason's sentence and runbook pointer.
var consultRules = map[Reason][2]string{
	ConsultUnconfigured: {"no consult endpoint is configured in brokerd.toml ([consult])", "see docs/runbook.md#consult-unconfigured"},
	ConsultSecret:       {"the session has seen secret data, and secret data never leaves the owner's hosts", "see docs/runbook.md#consult-secret"},
	ConsultHost:         {"no consult grant names the configured endpoint's host", "see docs/runbook.md#consult-host"},
	ConsultAboveClass:   {"the session's taint is above the max_taint of every consult grant for this endpoint", "see docs/runbook.md#consult-above-class"},
	ConsultUntrusted:    {"the session has read untrusted content, and no consult grant for this endpoint says untrusted_sessions = true", "see docs/runbook.md#consult-untrusted"},
	ConsultIdentity: {"every session's prompt holds the owner's identity files (memory/soul.md, memory.md, user.md), which the model could copy into the question, and no consult grant for this endpoint lets them leave (memory = \"identity_may_leave\" or \"all_may_leave\")",
		"see docs/runbook.md#consult-identity"},
	ConsultRecalled: {"the session has been handed recalled memory (recall or ask_memory results: notes, past sessions, fleet memory), which the model could copy into the question, and no consult grant for this endpoint says memory = \"all_may_leave\"",
		"see docs/runbook.md#consult-recalled"},
}

// ConsultReasons lists the consult reasons, for tests and the runbook.
func ConsultReasons() []Reason {
	return []Reason{ConsultUnconfigured, ConsultSecret, ConsultHost, ConsultAboveClass, ConsultUntrusted, ConsultIdentity, ConsultRecalled}
}

// consultError is a consult denial's text: the rule and its runbook entry.
func consultError(d *Denial) (string, bool) {
	r, ok := consultRules[d.Reason]
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%q denied (%s): %s (session taint %s, untrusted %v, recalled memory %v); %s",
		toolset.Consult, d.Reason, r[0], d.Session.Taint, d.Session.Untrusted, d.Session.Recalled, r[1]), true
}

// ConsultDetail is the one-line detail an audit record of a consult
// denial carries ("" for other denials).
func (d *Denial) ConsultDetail() string {
	if r, ok := consultRules[d.Reason]; ok {
		return string(d.Reason) + ": " + r[0]
	}
	return ""
}

// matchConsult applies rule 9.
func matchConsult(grants []grant.Grant, a toolargs.Consult, ep *Endpoint, sess Session, now time.Time) (*verdict, *Denial) {
	if ep == nil {
		return nil, &Denial{Reason: ConsultUnconfigured}
	}
	if sess.Taint == dataclass.Secret {
		return nil, &Denial{Reason: ConsultSecret}
	}
	var active []grant.Grant
	expired := 0
	for _, g := range grants {
		switch {
		case g.Tool() != toolset.Consult:
		case !g.ActiveAt(now):
			expired++
		default:
			active = append(active, g)
		}
	}
	if len(active) == 0 {
		return nil, &Denial{Reason: NoGrant, Expired: expired}
	}
	var forHost []grant.Grant
	for _, g := range active {
		if hostrule.Allowed(ep.Host, g.Hosts()) {
			forHost = append(forHost, g)
		}
	}
	slices.SortFunc(forHost, func(x, y grant.Grant) int { return cmp.Compare(x.ID(), y.ID()) })
	for _, g := range forHost {
		if g.Mode() == grant.Deny {
			w := ref(g)
			return nil, &Denial{Reason: DeniedByGrant, Grant: &w, Matched: refs(forHost), Expired: expired}
		}
	}
	if len(forHost) == 0 {
		return nil, &Denial{Reason: ConsultHost, Expired: expired}
	}
	var hits []grant.Grant
	above := 0
	for _, g := range forHost {
		if sess.Taint.AtMost(g.MaxTaint()) {
			hits = append(hits, g)
		} else {
			above++
		}
	}
	if len(hits) == 0 {
		return nil, &Denial{Reason: ConsultAboveClass, Expired: expired, AboveTaint: above}
	}
	if sess.Untrusted {
		hits = slices.DeleteFunc(hits, func(g grant.Grant) bool { return !g.UntrustedSessions() })
		if len(hits) == 0 {
			return nil, &Denial{Reason: ConsultUntrusted, Expired: expired, AboveTaint: above}
		}
	}
	// Memory text: the identity files are in every session, recalled
	// memory in those that were handed it; the grant must let it out.
	need, why := grant.IdentityMayLeave, ConsultIdentity
	if sess.Recalled {
		need, why = grant.AllMayLeave, ConsultRecalled
	}
	hits = slices.DeleteFunc(hits, func(g grant.Grant) bool { return g.Memory() < need })
	if len(hits) == 0 {
		return nil, &Denial{Reason: why, Expired: expired, AboveTaint: above}
	}
	// The most restrictive mode wins, then the smallest id (hits are
	// sorted by id); the winner's model and secret are the call's.
	best := hits[0]
	for _, g := range hits[1:] {
		if g.Mode() < best.Mode() {
			best = g
		}
	}
	v := &verdict{mode: best.Mode(), winner: ref(best), matched: refs(hits), class: dataclass.Private,
		untrusted: true, hosts: []hostrule.Name{ep.Host}, secret: best.Secret()}
	for _, g := range hits {
		v.class = dataclass.Join(v.class, g.ResultClass())
	}
	body, err := consult.Body(best.Model(), ep.TemperatureMilli, a)
	if err != nil {
		return nil, &Denial{Reason: InvalidArguments, Detail: oneLine(err.Error())}
	}
	u, err := toolargs.ParseURL(strings.TrimSuffix(ep.Base, "/") + "/chat/completions")
	if err != nil {
		return nil, &Denial{Reason: ConsultUnconfigured}
	}
	v.consult = &ConsultCall{ConsultCall: toolargs.ConsultCall{URL: u, Body: string(body), IdleMS: ep.IdleMS, TotalMS: ep.TotalMS}, Model: best.Model()}
	return v, nil
}

func refs(gs []grant.Grant) []GrantRef {
	out := make([]GrantRef, len(gs))
	for i, g := range gs {
		out[i] = ref(g)
	}
	return out
}

// Consult is an allowed consult's outbound request, and false for any
// other Decision.
func (d Decision) Consult() (ConsultCall, bool) {
	c := d.get().consult
	if c == nil {
		return ConsultCall{}, false
	}
	return *c, true
}
