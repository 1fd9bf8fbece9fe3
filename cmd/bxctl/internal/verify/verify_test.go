package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/model/selftest"
)

const template = "{# the production keep-thinking template #}"

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// script queues what a capable thinking model answers: the self-test's
// tool call and two turns, then the long thinking of the reasoning check.
func script(srv *fake.Server, think int) {
	srv.Script(
		fake.Reply{Reasoning: "The owner wants the time.", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}},
		fake.Reply{Reasoning: "Greet.", Content: "Hello."},
		fake.Reply{Reasoning: "Again.", Content: "Hello again."},
		// Real time per token, so reasoning_end arrives mid-thought.
		fake.Reply{Reasoning: "Two is prime.", ThinkTokens: think, Content: "There are 25 primes below 100.", TokenDelay: time.Millisecond},
	)
}

func run(t *testing.T, opts fake.Options, think int, b sessionlog.Baseline, recorded string) Report {
	t.Helper()
	srv := fake.New(t, opts)
	script(srv, think)
	cfg := llama.Config{BaseURL: srv.URL(), Model: "fake-model", IDSlot: 0, MaxTokens: 2048}
	c, err := llama.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ThinkingCap = CapTokens
	capped, err := llama.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Run(context.Background(), Options{Client: c, Capped: capped, Slot: 0, Baseline: b,
		Expect: selftest.Expect{NCtx: 8192, Slots: 2, TemplateSHA256: recorded}})
}

func row(t *testing.T, r Report, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s row in %+v", name, r)
	return Check{}
}

var small = sessionlog.Baseline{System: "You are Boxmaker, the owner's agent."}

func TestPasses(t *testing.T) {
	r := run(t, fake.Options{ChatTemplate: template}, 200, small, sum(template))
	if !r.OK() {
		t.Fatalf("failed on the keep-thinking template: %+v", r)
	}
	for _, n := range []string{selftest.CheckServer, selftest.CheckContext, selftest.CheckSettings, selftest.CheckFit, selftest.CheckToolCall, selftest.CheckCache, CheckBaseline, CheckReasoning} {
		if c := row(t, r, n); c.Status != Pass {
			t.Errorf("%s: %s %s", n, c.Status, c.Detail)
		}
	}
	if d := row(t, r, CheckReasoning).Detail; !strings.Contains(d, "thinking ended at") {
		t.Errorf("reasoning detail: %s", d)
	}
}

func TestFailures(t *testing.T) {
	big := sessionlog.Baseline{System: strings.Repeat("word ", 1600)} // 3200 tokens by the fake's tokenizer
	tests := []struct {
		name     string
		opts     fake.Options
		think    int
		b        sessionlog.Baseline
		recorded string
		check    string
		status   Status
		detail   string
	}{
		{"stock template", fake.Options{ChatTemplate: template, DropEarlierThinking: true}, 200, small, sum(template), selftest.CheckCache, Fail, "turn 2 reused"},
		{"template differs", fake.Options{ChatTemplate: "{# stock #}"}, 200, small, sum(template), selftest.CheckSettings, Fail, "chat template sha256 is"},
		{"budget informational", fake.Options{ChatTemplate: "{# stock #}"}, 200, big, sum(template), CheckBaseline, Info, "informational"},
		{"over the budget", fake.Options{ChatTemplate: template}, 200, big, sum(template), CheckBaseline, Fail, "over the budget"},
		{"slot count differs", fake.Options{ChatTemplate: template, Slots: 1}, 200, small, sum(template), selftest.CheckSettings, Fail, "server has 1 slots, recorded 2"},
		{"context differs", fake.Options{ChatTemplate: template, NCtx: 4096}, 200, small, sum(template), selftest.CheckContext, Fail, "/props reports 4096"},
		{"cap never reached", fake.Options{ChatTemplate: template}, 0, small, sum(template), CheckReasoning, Fail, "effect was not observed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.opts, tt.think, tt.b, tt.recorded)
			c := row(t, r, tt.check)
			if c.Status != tt.status || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("%s: %s %q, want %s containing %q", tt.check, c.Status, c.Detail, tt.status, tt.detail)
			}
			if tt.status == Fail && r.OK() {
				t.Error("the run passed with a failed check")
			}
			if tt.status == Info && !strings.Contains(c.Detail, "3200 tokens") {
				t.Errorf("the informational figure is not the tokenizer's count: %s", c.Detail)
			}
		})
	}
}

func TestServerDown(t *testing.T) {
	c, err := llama.New(llama.Config{BaseURL: "http://127.0.0.1:1", Model: "m", MaxTokens: 2048})
	if err != nil {
		t.Fatal(err)
	}
	r := Run(context.Background(), Options{Client: c, Capped: c, Baseline: small, Expect: selftest.Expect{NCtx: 8192, Slots: 2, TemplateSHA256: sum(template)}})
	if r.OK() || row(t, r, CheckReasoning).Status != Fail {
		t.Fatalf("passed with no server: %+v", r)
	}
}
