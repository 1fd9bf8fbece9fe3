package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/wire"
)

// TestConsultConfig: deploy/brokerd.toml's [consult] loads; a bad
// endpoint or a temperature above 0.6 is refused.
func TestConsultConfig(t *testing.T) {
	c, err := Load("../../../../deploy/brokerd.toml")
	if err != nil {
		t.Fatal(err)
	}
	ep := c.consultEndpoint()
	if ep == nil || ep.Host.String() != "api.z.ai" || ep.Base != "https://api.z.ai/api/paas/v4" || ep.TemperatureMilli != 600 || ep.IdleMS != 60000 || ep.TotalMS != 900000 {
		t.Fatalf("endpoint %+v", ep)
	}
	hot := 700
	for _, cc := range []ConsultConfig{
		{Endpoint: "http://api.example.com/v1"},
		{Endpoint: "https://api.example.com:8443/v1"},
		{Endpoint: "https://127.0.0.1/v1"},
		{Endpoint: "https://api.example.com/v1?key=x"},
		{Endpoint: "https://api.example.com/v1/chat/completions"},
		{Endpoint: "https://api.example.com/v1", TemperatureMilli: &hot},
		{Endpoint: "https://api.example.com/v1", IdleTimeoutS: 100, TotalTimeoutS: 50},
		{},
	} {
		if err := cc.check(); err == nil {
			t.Errorf("[consult] %+v accepted", cc)
		}
	}
}

const consultGrants = `[[grant]]
id = "consult-ask"
tool = "consult"
hosts = ["api.example.com"]
secret = "KEY"
model = "m-1"
max_taint = "private"
mode = "ask"
`

func consultCall(h *harness, t *testing.T) *conn {
	return h.call(t, "call_tool", `{"name":"consult","arguments":{"question":"why <so>?","context":"c"}}`)
}

// TestConsultRefusalsByName: without [consult], with no consult grant,
// with the endpoint's host in no grant, and above every grant's class, a
// consult is refused by its rule with its runbook entry, and the audit
// record's detail names the rule.
func TestConsultRefusalsByName(t *testing.T) {
	endpoint := func(c *Config) { c.Consult = &ConsultConfig{Endpoint: "https://api.example.com/v1"} }
	for _, tt := range []struct {
		name, grants, anchor string
		cfg                  func(*Config)
	}{
		{"no [consult]", consultGrants, "consult-unconfigured", func(*Config) {}},
		{"no grant", grants, "no-grant", endpoint},
		{"host not in grant", strings.Replace(consultGrants, "api.example.com", "api.other.example", 1), "consult-host", endpoint},
		{"above class", strings.Replace(consultGrants, `max_taint = "private"`, `max_taint = "public"`, 1), "consult-above-class", endpoint},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := startWith(t, tt.grants, tt.cfg)
			r := result(t, consultCall(h, t))
			if r.Status != wire.StatusDenied || !strings.HasSuffix(r.Output, "see docs/runbook.md#"+tt.anchor) {
				t.Errorf("consult = %+v, want refused with #%s", r, tt.anchor)
			}
		})
	}
}

// TestConsultAskShowsThePayload: an ask consult grant parks the call with
// the whole payload for the owner (URL, model, every byte of the body).
func TestConsultAskShowsThePayload(t *testing.T) {
	h := startWith(t, consultGrants, func(c *Config) { c.Consult = &ConsultConfig{Endpoint: "https://api.example.com/v1"} })
	c := consultCall(h, t)
	if _, ok := c.Recv().(*wire.ToolPending); !ok {
		t.Fatal("want tool_pending")
	}
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.ListApprovals{})
	list := admin.Recv().(*wire.Approvals)
	if len(list.Calls) != 1 {
		t.Fatalf("approvals %+v", list)
	}
	var shown struct {
		URL   string          `json:"url"`
		Model string          `json:"model"`
		Body  json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(list.Calls[0].Arguments, &shown); err != nil {
		t.Fatal(err)
	}
	if shown.URL != "https://api.example.com/v1/chat/completions" || shown.Model != "m-1" ||
		!strings.Contains(string(shown.Body), `"content":"why <so>?\n\n--- context supplied by the assistant ---\nc"`) || !strings.Contains(string(shown.Body), `"temperature":0.6`) {
		t.Errorf("the approval shows %s", list.Calls[0].Arguments)
	}
}

// TestConsultWithoutRunnerLogsNothing: with no tool containers a consult
// fails with runner-unavailable and the consult log holds no request
// that never left.
func TestConsultWithoutRunnerLogsNothing(t *testing.T) {
	h := startWith(t, strings.Replace(consultGrants, `mode = "ask"`, `mode = "auto"`, 1), func(c *Config) {
		c.Consult = &ConsultConfig{Endpoint: "https://api.example.com/v1"}
	})
	r := result(t, consultCall(h, t))
	if r.Status != wire.StatusFailed || !strings.HasSuffix(r.Output, "see docs/runbook.md#runner-unavailable") {
		t.Errorf("consult = %+v", r)
	}
	h.stop()
	if n := len(consultRequestsOrNone(t, h.cfg.StateDir)); n != 0 {
		t.Errorf("the consult log holds %d requests", n)
	}
}
