package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/fake/chatapi"
	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

const consultKey = "sk-consult-7e21c9"

// consultHarness is brokerd with real tool containers (the testnet image,
// whose egress proxy may reach the podman bridge) and a recording
// OpenAI-compatible fake at https://api.test, on the host's port 443
// (the bridge gateway, 10.88.0.1, as the egress tests' listener).
func consultHarness(t *testing.T, extraGrants string, edits ...func(*brokerd.Config)) (*harness, *chatapi.Server, string) {
	t.Helper()
	svc := podmantest.Require(t)
	image := svc.TestnetToolImage(t)
	ln := podmantest.ListenPort(t, 443)
	fake := chatapi.New(chatapi.Options{Content: "forty-two", Reasoning: "six sevens are forty-two"})
	fake.ServeTLS(t, ln, "api.test")
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for _, d := range []string{"trusted", "secret", "untrusted"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	// A file secret: an env: secret is unset once read, so brokerd could
	// load it for one call only (a limitation of the store, reported).
	keyFile := filepath.Join(t.TempDir(), "consult-key")
	os.WriteFile(keyFile, []byte(consultKey+"\n"), 0o600)
	grants := `[[grant]]
id = "consult"
tool = "consult"
hosts = ["api.test"]
secret = "CONSULT_KEY"
model = "fake-remote"
max_taint = "private"
memory = "identity_may_leave"
mode = "auto"
` + shellGrant("trusted", dir, `result_class = "private"`, "untrusted = false") +
		shellGrant("secret", dir, `result_class = "secret"`, "untrusted = false") +
		shellGrant("untrusted", dir, `result_class = "private"`, "untrusted = true") + extraGrants
	h := startTuned(t, grants, func(c *brokerd.Config) {
		r, _ := brokerd.Runner{PodmanSocket: svc.Socket, ToolImage: image}.Check()
		c.Runner = &r
		ref, _ := secret.ParseRef("file:" + keyFile)
		c.Secrets = map[string]secret.Ref{"CONSULT_KEY": ref}
		c.Consult = &brokerd.Consult{Endpoint: "https://api.test/v1", IdleTimeoutS: 2, TotalTimeoutS: 10}
		for _, e := range edits {
			e(c)
		}
	}, func(r *runner.Config) { runner.TestOnlyNetwork(r, []string{"api.test:10.88.0.1"}) })
	return h, fake, dir
}

func shellGrant(id, dir string, extra ...string) string {
	return fmt.Sprintf("[[grant]]\nid = %q\ntool = \"shell\"\npaths = [%q]\nmax_taint = \"secret\"\nmode = \"auto\"\n%s\n", id, filepath.Join(dir, id), strings.Join(extra, "\n"))
}

func (h *harness) callIn(t testing.TB, session, tool, args string) *conn {
	c := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	c.Send(&wire.ToolRequest{Session: session, CallID: "c1", Tool: tool, Arguments: []byte(args)})
	return c
}

// consultIn asks one consult in session and returns its result, after
// the consult_pending that must come first when it is sent.
func (h *harness) consultIn(t *testing.T, session, question string, sent bool) *wire.ToolResult {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"question": question, "context": "asked by a test"})
	c := h.callIn(t, session, "call_tool", fmt.Sprintf(`{"name":"consult","arguments":%s}`, args))
	v := c.Recv()
	if p, ok := v.(*wire.ConsultPending); ok {
		if !sent {
			t.Fatalf("consult_pending for a consult that should be refused: %+v", p)
		}
		v = c.Recv()
	} else if sent {
		t.Fatalf("first answer %s %+v, want consult_pending", v.Tag(), v)
	}
	r, ok := v.(*wire.ToolResult)
	if !ok {
		t.Fatalf("answer %s, want tool_result", v.Tag())
	}
	return r
}

// Markers planted where a consult must never look.
const (
	markerToolResult = "MARKER-TOOL-RESULT-5b8e"
	markerArgsOther  = "MARKER-OTHER-CALL-1d42"
	// Memory text a careless or misled model copies into a question:
	// a recalled note, and a line of user.md from its prompt.
	markerRecalled = "MARKER-RECALLED-3c07"
	markerIdentity = "MARKER-IDENTITY-USER-9a51"
)

// TestConsultThroughTheProxy is the consult's whole path: brokerd logs
// each payload, a fresh tool container sends it through the call's egress
// proxy over TLS it verifies (against the fake's test CA) with the key as
// its one secret, and the answer comes back apart from its reasoning,
// labelled untrusted. The fake's recorded requests equal the consult
// log's payloads byte for byte and none is unlogged; no marker from the
// session's tool results reaches a payload; every request is streaming,
// at temperature at most 0.6, with no tools. A stalled and a never-ending
// stream fail at their limits with their runbook entries, and both
// chains verify. Memory text the model copies into a question never
// leaves without the grant's opt-in: after a recall, under a grant that
// lets only identity out, and the identity files themselves under a
// grant that lets no memory out, are refused by name before anything is
// logged or sent.
func TestConsultThroughTheProxy(t *testing.T) {
	memtool := recallMemoryd(t, markerRecalled)
	h, fake, dir := consultHarness(t, "", func(c *brokerd.Config) { c.MemtoolSocket = memtool })
	// Each consult's session has a marker in an earlier tool result. A
	// consult's answer is untrusted, so each consult gets a session of its
	// own: a second one would be refused (consult-untrusted).
	planted := func(session string) {
		out := result(t, h.callIn(t, session, "shell", fmt.Sprintf(`{"command":"echo %s; echo %s","workdir":%q}`, markerToolResult, markerArgsOther, filepath.Join(dir, "trusted"))))
		if out.Status != wire.StatusRan || !strings.Contains(out.Output, markerToolResult) || out.Untrusted {
			t.Fatalf("shell = %+v", out)
		}
	}
	for i, q := range []string{"What is six times seven?", "And <seven> times \"six\" & more?"} {
		session := fmt.Sprintf("s%d", i+1)
		planted(session)
		r := h.consultIn(t, session, q, true)
		if r.Status != wire.StatusRan || !strings.HasSuffix(r.Output, "\nforty-two") || !r.Untrusted || r.Class.String() != "private" {
			t.Fatalf("consult = %+v", r)
		}
		if strings.Contains(r.Output, "six sevens") {
			t.Errorf("the reasoning reached the model: %q", r.Output)
		}
		if again := h.consultIn(t, session, "again?", false); again.Status != wire.StatusDenied || !strings.HasSuffix(again.Output, "#consult-untrusted") {
			t.Errorf("a second consult after an untrusted answer = %+v", again)
		}
	}
	planted("s3")
	fake.SetMode(chatapi.Stall)
	if r := h.consultIn(t, "s3", "stall?", true); r.Status != wire.StatusFailed || !strings.HasSuffix(r.Output, "see docs/runbook.md#consult-stalled") {
		t.Errorf("stalled consult = %+v", r)
	}
	planted("s4")
	fake.SetMode(chatapi.Endless)
	if r := h.consultIn(t, "s4", "endless?", true); r.Status != wire.StatusFailed || !strings.HasSuffix(r.Output, "see docs/runbook.md#consult-unbounded") {
		t.Errorf("never-ending consult = %+v", r)
	}
	fake.SetMode(chatapi.Answer)
	if r := result(t, h.callIn(t, "s5", "recall", `{"query":"tea","k":3}`)); r.Status != wire.StatusRan || !strings.Contains(r.Output, markerRecalled) {
		t.Fatalf("recall = %+v", r)
	}
	if r := h.consultIn(t, "s5", "The owner's note says "+markerRecalled+"; is that wise?", false); r.Status != wire.StatusDenied || !strings.HasSuffix(r.Output, "see docs/runbook.md#consult-recalled") {
		t.Errorf("a consult after a recall = %+v, want refused with #consult-recalled", r)
	}
	stays := strings.Replace(readGrants(t, h), `memory = "identity_may_leave"`, `memory = "stays"`, 1)
	os.WriteFile(filepath.Join(h.cfg.GrantsDir, "grants.toml"), []byte(stays), 0o600)
	planted("s6")
	if r := h.consultIn(t, "s6", "My owner is "+markerIdentity+"; what should I get them?", false); r.Status != wire.StatusDenied || !strings.HasSuffix(r.Output, "see docs/runbook.md#consult-identity") {
		t.Errorf("a consult under memory = \"stays\" = %+v, want refused with #consult-identity", r)
	}
	h.stop()

	recorded := fake.Requests()
	logged := consultRequests(t, h.cfg.StateDir)
	if len(recorded) != 4 || len(logged) != len(recorded) {
		t.Fatalf("the fake got %d requests and the log holds %d, want 4 each (0 unlogged)", len(recorded), len(logged))
	}
	for i, r := range recorded {
		l := logged[i]
		if !bytes.Equal(r.Body, []byte(l.Body)) {
			t.Errorf("request %d: recorded body differs from the log's:\n%s\n%s", i, r.Body, l.Body)
		}
		if r.Path != "/v1/chat/completions" || l.URL != "https://api.test/v1/chat/completions" || r.Authorization != "Bearer "+consultKey || l.Model != "fake-remote" || l.Session != fmt.Sprintf("s%d", i+1) {
			t.Errorf("request %d: %s %s, log %+v", i, r.Path, r.Authorization, l)
		}
		checkPayload(t, r.Body)
	}
	rep := consultlog.Verify(layout.ConsultLog.In(h.cfg.StateDir), layout.Audit.In(h.cfg.StateDir))
	if !rep.OK() || rep.Requests != 4 || rep.Responses != 4 {
		t.Errorf("consult log: %+v %v", rep, rep.Problem)
	}
	if a := audit.Verify(layout.Audit.In(h.cfg.StateDir)); !a.OK() {
		t.Errorf("audit: %s", a.Summary())
	}
	// The audit log names each consult's arguments by hash; the payload
	// itself is in the consult log only.
	logs, _ := filepath.Glob(filepath.Join(layout.Audit.In(h.cfg.StateDir), "*.jsonl"))
	for _, f := range logs {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("six times seven")) || !bytes.Contains(b, []byte(`"question_sha256"`)) {
			t.Errorf("audit log %s holds a consult's question, or not its hash", f)
		}
	}
	b, _ := os.ReadFile(filepath.Join(layout.ConsultLog.In(h.cfg.StateDir), consultlog.FileName))
	if bytes.Contains(b, []byte(consultKey)) {
		t.Error("the key is in the consult log")
	}
	if !bytes.Contains(b, []byte(`"reasoning":"six sevens are forty-two"`)) {
		t.Error("the reasoning is not kept in the consult log")
	}
}

// checkPayload: no marker, streaming, temperature at most 0.6, no tools.
func checkPayload(t *testing.T, body []byte) {
	t.Helper()
	for _, m := range []string{markerToolResult, markerArgsOther, markerRecalled, markerIdentity, "MARKER"} {
		if bytes.Contains(body, []byte(m)) {
			t.Errorf("payload holds the marker %s: %s", m, body)
		}
	}
	var p map[string]json.RawMessage
	if err := strict.Unmarshal(body, &p); err != nil {
		t.Fatalf("payload %s: %v", body, err)
	}
	var temp json.Number
	json.Unmarshal(p["temperature"], &temp)
	if f, err := temp.Float64(); err != nil || f > 0.6 {
		t.Errorf("temperature %s", p["temperature"])
	}
	if _, ok := p["tools"]; ok || string(p["stream"]) != "true" {
		t.Errorf("payload has tools or is not streaming: %s", body)
	}
}

func readGrants(t *testing.T, h *harness) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.cfg.GrantsDir, "grants.toml"))
	if err != nil || !strings.Contains(string(b), `memory = "identity_may_leave"`) {
		t.Fatalf("grants: %v\n%s", err, b)
	}
	return string(b)
}

func consultRequests(t *testing.T, state string) []consultlog.Request {
	t.Helper()
	var out []consultlog.Request
	err := jsonl.Scan(filepath.Join(layout.ConsultLog.In(state), consultlog.FileName), consultlog.MaxLine+1, func(_ int, b []byte) error {
		r, err := consultlog.ParseLine(b)
		if err != nil {
			return err
		}
		if q, ok := r.(*consultlog.Request); ok {
			out = append(out, *q)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConsultRefusedSessions: a secret session and an untrusted one are
// refused by name, and nothing reaches the endpoint or the consult log.
func TestConsultRefusedSessions(t *testing.T) {
	h, fake, dir := consultHarness(t, "")
	for _, tt := range []struct{ session, grant, anchor string }{
		{"s-secret", "secret", "consult-secret"},
		{"s-untrusted", "untrusted", "consult-untrusted"},
	} {
		if r := result(t, h.callIn(t, tt.session, "shell", fmt.Sprintf(`{"command":"echo x","workdir":%q}`, filepath.Join(dir, tt.grant)))); r.Status != wire.StatusRan {
			t.Fatalf("shell = %+v", r)
		}
		r := h.consultIn(t, tt.session, "q", false)
		if r.Status != wire.StatusDenied || !strings.HasSuffix(r.Output, "see docs/runbook.md#"+tt.anchor) {
			t.Errorf("%s: consult = %+v, want refused with #%s", tt.session, r, tt.anchor)
		}
	}
	h.stop()
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the endpoint got %d requests", n)
	}
	if n := len(consultRequestsOrNone(t, h.cfg.StateDir)); n != 0 {
		t.Errorf("the consult log holds %d requests", n)
	}
}

func consultRequestsOrNone(t *testing.T, state string) []consultlog.Request {
	if _, err := os.Stat(filepath.Join(layout.ConsultLog.In(state), consultlog.FileName)); err != nil {
		return nil
	}
	return consultRequests(t, state)
}

// TestConsultStopsWhenLoopdGoes: loopd hanging up while a consult is
// pending (the owner stopped the turn) stops it long before its limits,
// and what happened is still logged.
func TestConsultStopsWhenLoopdGoes(t *testing.T) {
	h, fake, _ := consultHarness(t, "", func(c *brokerd.Config) {
		c.Consult = &brokerd.Consult{Endpoint: "https://api.test/v1", IdleTimeoutS: 30, TotalTimeoutS: 60}
	})
	fake.SetMode(chatapi.Stall)
	c := h.callIn(t, "s1", "call_tool", `{"name":"consult","arguments":{"question":"q"}}`)
	if _, ok := c.Recv().(*wire.ConsultPending); !ok {
		t.Fatal("want consult_pending")
	}
	start := time.Now()
	c.C.Close()
	state := h.cfg.StateDir
	for {
		b, _ := os.ReadFile(filepath.Join(layout.ConsultLog.In(state), consultlog.FileName))
		if bytes.Contains(b, []byte(`"type":"response"`)) {
			if !bytes.Contains(b, []byte("could not be run")) {
				t.Errorf("the response does not say the call was stopped:\n%s", b)
			}
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the consult went on after loopd hung up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.stop()
	if rep := consultlog.Verify(layout.ConsultLog.In(state), layout.Audit.In(state)); !rep.OK() {
		t.Errorf("consult log: %v", rep.Problem)
	}
}
