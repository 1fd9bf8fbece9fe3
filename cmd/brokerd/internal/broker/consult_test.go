package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestConsultConfig: deploy/brokerd.toml's [consult] reaches the policy
// as its endpoint (the table's refusals are package roleconf/brokerd's
// tests).
func TestConsultConfig(t *testing.T) {
	c, _, err := brokerd.Load("../../../../deploy/brokerd.toml", "/var/lib/boxmaker")
	if err != nil {
		t.Fatal(err)
	}
	ep := consultEndpoint(c)
	if ep == nil || ep.Host.String() != "api.z.ai" || ep.Base != "https://api.z.ai/api/paas/v4" || ep.TemperatureMilli != 600 || ep.IdleMS != 60000 || ep.TotalMS != 900000 {
		t.Fatalf("endpoint %+v", ep)
	}
}

const consultGrants = `[[grant]]
id = "consult-ask"
tool = "consult"
hosts = ["api.example.com"]
secret = "KEY"
model = "m-1"
max_taint = "private"
memory = "identity_may_leave"
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
	endpoint := func(c *brokerd.Config) { c.Consult = &brokerd.Consult{Endpoint: "https://api.example.com/v1"} }
	for _, tt := range []struct {
		name, grants, anchor string
		cfg                  func(*brokerd.Config)
	}{
		{"no [consult]", consultGrants, "consult-unconfigured", func(*brokerd.Config) {}},
		{"no grant", grants, "no-grant", endpoint},
		{"host not in grant", strings.Replace(consultGrants, "api.example.com", "api.other.example", 1), "consult-host", endpoint},
		{"above class", strings.Replace(consultGrants, `max_taint = "private"`, `max_taint = "public"`, 1), "consult-above-class", endpoint},
		{"identity stays", strings.Replace(consultGrants, `memory = "identity_may_leave"`, `memory = "stays"`, 1), "consult-identity", endpoint},
		{"no memory key", strings.Replace(consultGrants, "memory = \"identity_may_leave\"\n", "", 1), "consult-identity", endpoint},
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
	h := startWith(t, consultGrants, func(c *brokerd.Config) { c.Consult = &brokerd.Consult{Endpoint: "https://api.example.com/v1"} })
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
	h := startWith(t, strings.Replace(consultGrants, `mode = "ask"`, `mode = "auto"`, 1), func(c *brokerd.Config) {
		c.Consult = &brokerd.Consult{Endpoint: "https://api.example.com/v1"}
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

// recallMemoryd answers every memory call with a trusted, private recall
// hit holding marker, as memoryd's recall of a clean note does.
func recallMemoryd(t *testing.T, marker string) string {
	t.Helper()
	return sockettest.Serve(t, filepath.Join(t.TempDir(), "memtool"), &wire.Memtool, rpc.NewServer(&wire.Memtool, slog.New(slog.DiscardHandler),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.MemtoolCall) strict.Variant {
			return &wire.ToolResult{Status: wire.StatusRan, Output: "recall \"tea\": 1 hits\n[memory, private] " + marker, Label: dataclass.Label{Class: dataclass.Private}}
		})).Serve)
}

// TestConsultAfterRecall: a recall's result (trusted and private, so no
// other rule refuses) marks the session as holding recalled memory, in
// its state file and after a rebuild from the audit log; a consult
// carrying the recalled text is then refused (consult-recalled) under a
// grant that lets only identity out, with nothing in the consult log,
// and parked for the owner under one that says all_may_leave. A session
// that never recalled is not marked.
func TestConsultAfterRecall(t *testing.T) {
	const marker = "MARKER-RECALLED-NOTE-77"
	sock := recallMemoryd(t, marker)
	endpoint := func(c *brokerd.Config) {
		c.Consult = &brokerd.Consult{Endpoint: "https://api.example.com/v1"}
		c.MemtoolSocket = sock
	}
	h := startWith(t, consultGrants, endpoint)
	if r := result(t, h.call(t, "recall", `{"query":"tea","k":3}`)); r.Status != wire.StatusRan || r.Untrusted || !strings.Contains(r.Output, marker) {
		t.Fatalf("recall = %+v", r)
	}
	args := fmt.Sprintf(`{"name":"consult","arguments":{"question":"the owner: %s"}}`, marker)
	r := result(t, h.call(t, "call_tool", args))
	if r.Status != wire.StatusDenied || !strings.HasSuffix(r.Output, "see docs/runbook.md#consult-recalled") || !strings.Contains(r.Output, "consult_recalled") {
		t.Errorf("consult after a recall = %+v, want refused with #consult-recalled", r)
	}
	// Another session that never recalled consults under the same grant.
	other := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	other.Send(&wire.ToolRequest{Session: "s2", CallID: "c1", Tool: "call_tool", Arguments: []byte(`{"name":"consult","arguments":{"question":"q"}}`)})
	if v, ok := other.Recv().(*wire.ToolPending); !ok {
		t.Errorf("a consult in a session that never recalled = %+v, want tool_pending", v)
	}
	// The owner opts in to recalled memory: the same call is parked.
	os.WriteFile(filepath.Join(h.cfg.GrantsDir, "grants.toml"), []byte(strings.Replace(consultGrants, `"identity_may_leave"`, `"all_may_leave"`, 1)), 0o600)
	c := h.call(t, "call_tool", args)
	if v, ok := c.Recv().(*wire.ToolPending); !ok {
		t.Errorf("a consult after a recall under all_may_leave = %+v, want tool_pending", v)
	}
	c.C.Close()
	other.C.Close()
	h.stop()
	file := filepath.Join(h.cfg.StateDir, "broker", "sessions", "s1.json")
	live, _ := os.ReadFile(file)
	if string(live) != `{"taint":"private","untrusted":false,"recalled":true}`+"\n" {
		t.Errorf("state file %q, want recalled", live)
	}
	if b, _ := os.ReadFile(filepath.Join(h.cfg.StateDir, "broker", "sessions", "s2.json")); strings.Contains(string(b), "recalled") {
		t.Errorf("a session that never recalled: %q", b)
	}
	os.Remove(file)
	if err := RebuildState(slog.New(slog.DiscardHandler), h.cfg); err != nil {
		t.Fatal(err)
	}
	if rebuilt, _ := os.ReadFile(file); string(rebuilt) != string(live) {
		t.Errorf("rebuilt state %q, live %q", rebuilt, live)
	}
	if n := len(consultRequestsOrNone(t, h.cfg.StateDir)); n != 0 {
		t.Errorf("the consult log holds %d requests", n)
	}
}
