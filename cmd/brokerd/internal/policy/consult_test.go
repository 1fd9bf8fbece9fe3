package policy

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
)

var endpoint = func() *Endpoint {
	h, _ := hostrule.ParseName("api.example.com")
	return &Endpoint{Base: "https://api.example.com/v1", Host: h, TemperatureMilli: 600, IdleMS: 60000, TotalMS: 600000}
}()

func ask(question string) Request {
	r := req("consult", map[string]string{"question": question, "context": "ctx"})
	r.Endpoint = endpoint
	return r
}

func consultGrant(id, mode string, kv ...string) string {
	base := []string{"hosts", hosts("api.example.com"), "secret", `"API_KEY"`, "model", `"m-1"`}
	if !slices.Contains(kv, "max_taint") {
		base = append(base, "max_taint", `"private"`)
	}
	if !slices.Contains(kv, "memory") {
		// The least a consult needs: every session holds identity text.
		base = append(base, "memory", `"identity_may_leave"`)
	}
	return g(id, "consult", mode, append(base, kv...)...)
}

// refused checks a consult refusal: its reason, and a message that names
// the rule and ends with its runbook entry.
func refused(t *testing.T, n *Denial, want Reason, anchor string) {
	t.Helper()
	if n == nil || n.Reason != want {
		t.Fatalf("denial %v, want %s", n, want)
	}
	if msg := n.Error(); !strings.Contains(msg, string(want)) && want != NoGrant || !strings.HasSuffix(msg, "see docs/runbook.md#"+anchor) {
		t.Errorf("message %q: want the rule and docs/runbook.md#%s at the end", msg, anchor)
	}
}

// TestConsultAllowed: an allowed consult carries the endpoint's host, the
// grant's secret, an untrusted result and a body built only from the two
// arguments, the grant's model and the fixed system text.
func TestConsultAllowed(t *testing.T) {
	d, _, _ := decide(t, set(t, consultGrant("c", "auto")), ask("why?"), private)
	c, ok := d.Consult()
	if !ok || d.Secret() != "API_KEY" || !d.Untrusted() || d.Class() != dataclass.Private || len(d.Hosts()) != 1 || d.Hosts()[0].String() != "api.example.com" {
		t.Fatalf("decision %+v", d.Record())
	}
	if c.URL.String() != "https://api.example.com/v1/chat/completions" || c.Model != "m-1" || c.IdleMS != 60000 || c.TotalMS != 600000 {
		t.Errorf("call %+v", c)
	}
	var body map[string]json.RawMessage
	if err := strict.Unmarshal([]byte(c.Body), &body); err != nil {
		t.Fatal(err)
	}
	if string(body["temperature"]) != "0.6" || string(body["stream"]) != "true" || body["tools"] != nil || !bytes.Contains(body["messages"], []byte("why?")) {
		t.Errorf("body %s", c.Body)
	}
	_, a, _ := decide(t, set(t, consultGrant("c", "ask")), ask("why?"), private)
	if a == nil || a.Consult == nil || a.Consult.Body != c.Body {
		t.Errorf("an ask does not carry the payload for the owner to read: %+v", a)
	}
}

func TestConsultRefusesSecretSession(t *testing.T) {
	// Even a grant that would apply at secret (a deny grant's max_taint)
	// cannot let a secret session out.
	_, _, n := decide(t, set(t, consultGrant("c", "auto")), ask("q"), secret)
	refused(t, n, ConsultSecret, "consult-secret")
}

func TestConsultRefusesAboveClass(t *testing.T) {
	// Every session is at least private; a consult grant that lets only
	// public data out applies to none.
	_, _, n := decide(t, set(t, consultGrant("c", "auto", "max_taint", `"public"`)), ask("q"), private)
	refused(t, n, ConsultAboveClass, "consult-above-class")
}

func TestConsultRefusesUntrustedWithoutPermission(t *testing.T) {
	_, _, n := decide(t, set(t, consultGrant("c", "auto")), ask("q"), Session{Taint: dataclass.Private, Untrusted: true})
	refused(t, n, ConsultUntrusted, "consult-untrusted")
	d, _, _ := decide(t, set(t, consultGrant("c", "auto", "untrusted_sessions", "true")), ask("q"), Session{Taint: dataclass.Private, Untrusted: true})
	if !d.Valid() {
		t.Error("untrusted_sessions = true did not allow an untrusted session")
	}
}

func TestConsultRefusesWithoutGrant(t *testing.T) {
	_, _, n := decide(t, set(t, g("f", "http_fetch", "auto", "hosts", hosts("api.example.com"))), ask("q"), private)
	refused(t, n, NoGrant, "no-grant")
	r := ask("q")
	r.Endpoint = nil
	_, _, n = decide(t, set(t, consultGrant("c", "auto")), r, private)
	refused(t, n, ConsultUnconfigured, "consult-unconfigured")
}

func TestConsultRefusesHostNotInGrant(t *testing.T) {
	other := consultGrant("c", "auto")
	other = strings.Replace(other, `"api.example.com"`, `"api.other.example"`, 1)
	_, _, n := decide(t, set(t, other), ask("q"), private)
	refused(t, n, ConsultHost, "consult-host")
}

// TestConsultDenyGrantWins: a deny grant for the endpoint wins over an
// auto one.
func TestConsultDenyGrantWins(t *testing.T) {
	deny := g("d", "consult", "deny", "hosts", hosts("api.example.com"), "secret", `"API_KEY"`, "model", `"m-1"`)
	_, _, n := decide(t, set(t, consultGrant("c", "auto"), deny), ask("q"), private)
	if n == nil || n.Reason != DeniedByGrant || n.Grant.ID != "d" {
		t.Errorf("denial %v, want denied_by_grant d", n)
	}
}

// TestConsultRefusesIdentityWithoutOptIn: every session's prompt holds
// the identity files, so a consult grant that lets no memory text out
// (memory absent or "stays") allows no consult, in ask mode as in auto:
// the owner reading the body is not the owner's grant saying it may go.
func TestConsultRefusesIdentityWithoutOptIn(t *testing.T) {
	for _, mode := range []string{"auto", "ask"} {
		absent := strings.Replace(consultGrant("c", mode), "memory = \"identity_may_leave\"\n", "", 1)
		if strings.Contains(absent, "memory") {
			t.Fatalf("grant %s", absent)
		}
		for _, gt := range []string{absent, consultGrant("c", mode, "memory", `"stays"`)} {
			_, _, n := decide(t, set(t, gt), ask("what does the owner like? MARKER-IDENTITY"), private)
			refused(t, n, ConsultIdentity, "consult-identity")
		}
	}
	// A stays grant beside one that opts in: the one that opts in decides.
	_, a, n := decide(t, set(t, consultGrant("a", "auto", "memory", `"stays"`), consultGrant("b", "ask")), ask("q"), private)
	if n != nil || a == nil || a.Grant.ID != "b" {
		t.Errorf("ask %+v, denial %v, want an ask by b", a, n)
	}
}

// TestConsultRefusesRecalledWithoutAll: a session handed recalled memory
// (recall, ask_memory) consults only under a grant that says
// all_may_leave; identity_may_leave is not enough. An unreadable session
// state reads as having recalled (and as secret, which refuses first).
func TestConsultRefusesRecalledWithoutAll(t *testing.T) {
	recalled := Session{Taint: dataclass.Private, Recalled: true}
	_, _, n := decide(t, set(t, consultGrant("c", "auto")), ask("q"), recalled)
	refused(t, n, ConsultRecalled, "consult-recalled")
	if !strings.Contains(n.Error(), "recalled memory true") {
		t.Errorf("message %q does not say the session holds recalled memory", n.Error())
	}
	d, _, n := decide(t, set(t, consultGrant("c", "auto", "memory", `"all_may_leave"`)), ask("q"), recalled)
	if n != nil || !d.Valid() {
		t.Errorf("all_may_leave did not allow a session that recalled: %v", n)
	}
	if d, _, _ := decide(t, set(t, consultGrant("c", "auto", "memory", `"all_may_leave"`)), ask("q"), private); !d.Valid() {
		t.Error("all_may_leave did not allow a session that never recalled")
	}
	if e := effective(Session{Taint: dataclass.Class(99)}); !e.Recalled || e.Taint != dataclass.Secret {
		t.Errorf("an invalid state reads as %+v", e)
	}
	// Redecide after an approval sees a recall made while the owner read.
	gs := set(t, consultGrant("c", "ask"))
	if _, a, _ := decide(t, gs, ask("q"), private); a == nil {
		t.Fatal("want an ask")
	}
	if _, n := Redecide(gs, ask("q"), recalled, now); n == nil || n.Reason != ConsultRecalled {
		t.Errorf("approved after a recall: %v, want consult_recalled", n)
	}
}
