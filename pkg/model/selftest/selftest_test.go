package selftest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
)

const template = "{# a template #}"

func templateHash() string {
	s := sha256.Sum256([]byte(template))
	return hex.EncodeToString(s[:])
}

func client(t *testing.T, srv *fake.Server, slot int) *llama.Client {
	t.Helper()
	// max_tokens 2048 leaves the fit check room on the fake's 8192-token
	// slots; TestFit tries the edges.
	c, err := llama.New(llama.Config{BaseURL: srv.URL(), Model: "fake-model", IDSlot: slot, MaxTokens: 2048})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withToolCall scripts the reply a capable model gives the tool-call check,
// then the two plain replies of the cache check.
func withToolCall(srv *fake.Server) {
	srv.Script(
		fake.Reply{Reasoning: "The owner wants the time.", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}},
		fake.Reply{Reasoning: "Greet.", Content: "Hello."},
		fake.Reply{Reasoning: "Again.", Content: "Hello again."},
	)
}

func byName(r Report) map[string]Check {
	m := map[string]Check{}
	for _, c := range r.Checks {
		m[c.Name] = c
	}
	return m
}

func TestAllPass(t *testing.T) {
	srv := fake.New(t, fake.Options{Slots: 2, NCtx: 8192, ChatTemplate: template})
	withToolCall(srv)
	r := Run(context.Background(), client(t, srv, 0), 0, Expect{NCtx: 8192, Slots: 2, TemplateSHA256: templateHash()})
	for _, c := range r.Checks {
		t.Logf("%s %v %s", c.Name, c.OK, c.Detail)
	}
	if !r.OK() || len(r.Checks) != 6 || r.NCtx != 8192 {
		t.Fatalf("Run = %v failed %v, n_ctx %d, want 6 passing checks on 8192", r.OK(), r.Failed(), r.NCtx)
	}
	if d := byName(r)[CheckCache].Detail; !strings.Contains(d, "(gap 1)") {
		t.Errorf("cache detail = %q, want the gap of 1 a real server shows", d)
	}
	// Whatever the client's settings, the self-test's own requests are
	// greedy and bounded.
	for i, body := range srv.Requests(0) {
		var sent struct {
			Temperature float64 `json:"temperature"`
			TopK        int     `json:"top_k"`
			MaxTokens   int     `json:"max_tokens"`
		}
		json.Unmarshal(body, &sent)
		if sent.Temperature != 0 || sent.TopK != 1 || (sent.MaxTokens != toolMaxTokens && sent.MaxTokens != turnMaxTokens) {
			t.Errorf("request %d: temperature %v, top_k %d, max_tokens %d; want greedy and bounded", i, sent.Temperature, sent.TopK, sent.MaxTokens)
		}
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name   string
		opts   fake.Options
		slot   int
		exp    Expect
		noTool bool
		failed string
		detail string
	}{
		{"context differs", fake.Options{NCtx: 4096}, 0, Expect{NCtx: 8192}, false, CheckContext, "configured 8192 tokens per slot, /props reports 4096"},
		{"slot missing", fake.Options{Slots: 1}, 1, Expect{}, false, CheckContext, "the configured slot 1 does not exist"},
		{"other slot missing", fake.Options{Slots: 2}, 0, Expect{OtherSlots: []int{2}}, false, CheckContext, "the configured slot 2 does not exist"},
		{"slot count differs", fake.Options{Slots: 1}, 0, Expect{Slots: 2}, false, CheckSettings, "server has 1 slots, recorded 2"},
		{"template differs", fake.Options{ChatTemplate: "other"}, 0, Expect{TemplateSHA256: templateHash()}, false, CheckSettings, "chat template sha256 is"},
		{"no tool call", fake.Options{}, 0, Expect{}, true, CheckToolCall, "answered without calling the tool"},
		// A new user's server: 2,048-token slots, a baseline of about
		// 3,000 tokens (issue 19).
		{"baseline over the slot", fake.Options{NCtx: 2048}, 0, Expect{Baseline: bigBaseline(3000)}, false, CheckFit, "a slot holds 2048: every turn would overflow"},
		// The baseline fits, but max_tokens and the margin do not.
		{"no room for max_tokens", fake.Options{NCtx: 3072}, 0, Expect{Baseline: bigBaseline(100)}, false, CheckFit, "every turn would overflow"},
		{"template drops thinking", fake.Options{DropEarlierThinking: true}, 0, Expect{}, false, CheckCache, "turn 2 reused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.ChatTemplate += template
			srv := fake.New(t, tt.opts)
			if !tt.noTool {
				withToolCall(srv)
			}
			r := Run(context.Background(), client(t, srv, tt.slot), tt.slot, tt.exp)
			if r.OK() {
				t.Fatal("Run passed")
			}
			got := byName(r)[tt.failed]
			if got.OK || !strings.Contains(got.Detail, tt.detail) || !strings.Contains(got.Detail, "see docs/runbook.md#"+"selftest-") {
				t.Errorf("%s = %+v, want a failure containing %q and a runbook pointer", tt.failed, got, tt.detail)
			}
			if f := r.Failed(); len(f) != 1 {
				t.Errorf("failed checks = %v, want only %s", f, tt.failed)
			}
		})
	}
}

func TestServerDown(t *testing.T) {
	c, err := llama.New(llama.Config{BaseURL: "http://127.0.0.1:1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	r := Run(context.Background(), c, 0, Expect{})
	if r.OK() || len(r.Failed()) != 6 || !strings.Contains(r.Checks[0].Detail, "see docs/runbook.md#selftest-server") {
		t.Errorf("Run against nothing = %+v", r)
	}
}

// bigBaseline is a system message of about n fake tokens ("w " is two)
// and one tool.
func bigBaseline(n int) *Baseline {
	return &Baseline{
		Messages: []chat.Message{{Role: chat.RoleSystem, Content: strings.Repeat("w ", n/2)}},
		Tools:    []chat.Tool{clockTool},
	}
}

// TestFit: the count is the server's, of the baseline with its tools, and
// a slot that holds baseline + max_tokens + FitMargin passes by one token
// and fails without it.
func TestFit(t *testing.T) {
	srv := fake.New(t, fake.Options{NCtx: 8192, ChatTemplate: template})
	c := client(t, srv, 0)
	b := bigBaseline(2000)
	msgs := append(slices.Clip(b.Messages), chat.Message{Role: chat.RoleUser, Content: "Hello."})
	n, err := c.InputTokens(context.Background(), llama.Request{Messages: msgs, Tools: b.Tools})
	if err != nil || n < 2000 {
		t.Fatalf("InputTokens = %d, %v; want at least the 2000 of the system message", n, err)
	}
	need := n + 2048 + FitMargin
	if ck := fitCheck(context.Background(), c, need, b); !ck.OK {
		t.Errorf("fit at exactly %d = %+v, want a pass", need, ck)
	}
	if ck := fitCheck(context.Background(), c, need-1, b); ck.OK || !strings.Contains(ck.Detail, "see docs/runbook.md#selftest-fit") {
		t.Errorf("fit at %d = %+v, want a refusal with its runbook pointer", need-1, ck)
	}
}

// TestFromUnloaded: against a router whose model is unloaded (an idle
// router unloads it), Run has the router load it first and every check
// passes; Serving, the read-only audit, loads nothing and fails server.
func TestFromUnloaded(t *testing.T) {
	srv := fake.New(t, fake.Options{Slots: 2, NCtx: 8192, ChatTemplate: template, LoadTime: 200 * time.Millisecond})
	srv.Unload()
	if r := Serving(context.Background(), client(t, srv, 0), 0, Expect{}); r.Checks[0].OK || !strings.Contains(r.Checks[0].Detail, "model is not loaded") {
		t.Fatalf("Serving against an unloaded model: %+v, want server failed, the model left unloaded", r.Checks[0])
	}
	withToolCall(srv)
	r := Run(context.Background(), client(t, srv, 0), 0, Expect{NCtx: 8192, Slots: 2, TemplateSHA256: templateHash()})
	if !r.OK() || !strings.Contains(r.Checks[0].Detail, "the router had the model unloaded and loaded it for this self-test") {
		t.Errorf("Run from unloaded = %+v", r.Checks)
	}
}

// TestModelUnknown: a model the router does not have fails server with
// the model-load runbook entry, and nothing else runs.
func TestModelUnknown(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	c, err := llama.New(llama.Config{BaseURL: srv.URL(), Model: "ornith"})
	if err != nil {
		t.Fatal(err)
	}
	r := Run(context.Background(), c, 0, Expect{})
	if r.OK() || len(r.Failed()) != 6 || !strings.HasSuffix(r.Checks[0].Detail, "see docs/runbook.md#selftest-model-load") || !strings.Contains(r.Checks[0].Detail, `no model "ornith"`) {
		t.Errorf("Run for an unknown model = %+v", r.Checks)
	}
}

// TestVision: the self-test records whether the model can see, from
// /props modalities.vision, and says so in the server check.
func TestVision(t *testing.T) {
	for _, see := range []bool{false, true} {
		srv := fake.New(t, fake.Options{Slots: 2, NCtx: 8192, ChatTemplate: template, Vision: see})
		r := Serving(context.Background(), client(t, srv, 0), 0, Expect{})
		want := map[bool]string{false: "vision no", true: "vision yes"}[see]
		if r.Vision != see || !strings.Contains(byName(r)[CheckServer].Detail, want) {
			t.Errorf("Vision %v: Report.Vision %v, server check %q", see, r.Vision, byName(r)[CheckServer].Detail)
		}
	}
}
