// Package verify is `bxctl verify-device` (the flake's `nix run
// .#verify-device`): the on-device checks of the inference host, run
// against the real llama-server (router) the deployment uses. It runs
// loopd's startup self-test (pkg/model/selftest) with every recorded figure
// required, sizes the session baseline with the server's own tokenizer
// against the brief's budget, and observes the thinking cap's
// reasoning_control effect on the real vocabulary.
//
// Invariant: a check passes only when it saw its figure on this server;
// every figure it compares with was recorded by the owner and given on the
// command line, never defaulted here. The baseline budget binds only when
// the server's chat template is the recorded one (the production model):
// on any other model its tokenizer differs, and the figure is reported as
// information, which does not change the exit code.
package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/model/selftest"
)

// BaselineBudget is the most tokens a session's baseline (system message
// and tools array) may take: the brief's Inference contract 1.
const BaselineBudget = 3000

// CapTokens is the thinking cap the reasoning check sets, low enough that
// any thinking model reaches it; CapSlack is how many more reasoning
// tokens may stream before the server acts on reasoning_end (it acts
// between tokens, while the client keeps reading).
const (
	CapTokens = 32
	CapSlack  = 16
)

// The check names verify adds to the self-test's.
const (
	CheckBaseline  = "baseline"
	CheckReasoning = "reasoning"
)

// Status is a check's outcome.
type Status string

// The statuses. Info is a figure that could not be held to its limit
// here; it never fails the run.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Info Status = "INFO"
)

// Check is one row of the table.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
}

// Report is every row, in the order run.
type Report struct {
	Checks []Check `json:"checks"`
}

// OK reports whether no check failed.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return false
		}
	}
	return len(r.Checks) > 0
}

// Options is what one run needs. Client is pinned to Slot with the
// deployment's settings; Capped is a client of the same server and model
// with ThinkingCap = CapTokens.
type Options struct {
	Client   *llama.Client
	Capped   *llama.Client
	Slot     int
	Expect   selftest.Expect // NCtx, Slots and TemplateSHA256 recorded
	Baseline sessionlog.Baseline
}

// Run runs every check.
func Run(ctx context.Context, o Options) Report {
	exp := o.Expect
	exp.Baseline = &selftest.Baseline{Messages: []chat.Message{{Role: chat.RoleSystem, Content: o.Baseline.System}}, Tools: o.Baseline.Tools}
	st := selftest.Run(ctx, o.Client, o.Slot, exp)
	var r Report
	for _, c := range st.Checks {
		s := Pass
		if !c.OK {
			s = Fail
		}
		r.Checks = append(r.Checks, Check{Name: c.Name, Status: s, Detail: c.Detail})
	}
	if !st.Checks[0].OK {
		r.Checks = append(r.Checks,
			Check{Name: CheckBaseline, Status: Fail, Detail: "not run: the server did not answer"},
			Check{Name: CheckReasoning, Status: Fail, Detail: "not run: the server did not answer"})
		return r
	}
	r.Checks = append(r.Checks, baselineCheck(ctx, o.Client, o.Baseline, exp.TemplateSHA256))
	r.Checks = append(r.Checks, reasoningCheck(ctx, o.Capped))
	return r
}

// baselineCheck counts the baseline with the server's tokenizer: the
// system message and the tools array as JSON, which is what the template
// renders them from.
func baselineCheck(ctx context.Context, c *llama.Client, b sessionlog.Baseline, recorded string) Check {
	ck := Check{Name: CheckBaseline, Status: Fail}
	props, err := c.Props(ctx)
	if err != nil {
		ck.Detail = fmt.Sprintf("read /props: %v; see docs/runbook.md#verify-baseline", err)
		return ck
	}
	sum := sha256.Sum256([]byte(props.ChatTemplate))
	production := strings.EqualFold(hex.EncodeToString(sum[:]), recorded)
	sys, err := c.Tokenize(ctx, b.System)
	if err != nil {
		ck.Detail = fmt.Sprintf("tokenize the system message: %v; see docs/runbook.md#verify-baseline", err)
		return ck
	}
	n := len(sys)
	if len(b.Tools) > 0 {
		js, err := json.Marshal(b.Tools)
		if err != nil {
			ck.Detail = fmt.Sprintf("encode the tools: %v", err)
			return ck
		}
		tools, err := c.Tokenize(ctx, string(js))
		if err != nil {
			ck.Detail = fmt.Sprintf("tokenize the tools: %v; see docs/runbook.md#verify-baseline", err)
			return ck
		}
		n += len(tools)
	}
	figure := fmt.Sprintf("%d tokens (system %d, %d tools) by /tokenize, budget %d", n, len(sys), len(b.Tools), BaselineBudget)
	switch {
	case !production:
		ck.Status = Info
		ck.Detail = figure + "; informational: the chat template is not the recorded one, so this tokenizer is not the production model's"
	case n > BaselineBudget:
		ck.Detail = figure + ": over the budget; shorten the system prompt, identity files or tool descriptions; see docs/runbook.md#verify-baseline"
	default:
		ck.Status = Pass
		ck.Detail = figure
	}
	return ck
}

// reasoningCheck asks for long thinking with the cap at CapTokens and
// checks that the thinking block ended near the cap and the model went on
// to answer: reasoning_control's effect, which the server's success:true
// alone does not prove.
func reasoningCheck(ctx context.Context, c *llama.Client) Check {
	ck := Check{Name: CheckReasoning, Status: Fail}
	comp, err := c.Complete(ctx, llama.Request{
		Messages: []chat.Message{
			{Role: chat.RoleSystem, Content: "You are a self-test. Think step by step at length before answering."},
			{Role: chat.RoleUser, Content: "How many prime numbers are there below 100? Reason through each number carefully, then answer in one sentence."},
		},
		MaxTokens: 512,
		Sampling:  &llama.Sampling{Temperature: 0, TopP: 1, TopK: 1},
	}, llama.SlotState{})
	if err != nil {
		ck.Detail = fmt.Sprintf("completion failed: %v; see docs/runbook.md#verify-reasoning", err)
		return ck
	}
	after := comp.Usage.CompletionTokens - comp.ReasoningTokens
	switch {
	case !comp.CapFired:
		ck.Detail = fmt.Sprintf("the model thought %d tokens, under the cap of %d: the effect was not observed (is it a thinking model?); see docs/runbook.md#verify-reasoning", comp.ReasoningTokens, CapTokens)
	case comp.CapErr != nil:
		ck.Detail = fmt.Sprintf("reasoning_end was refused: %v; see docs/runbook.md#verify-reasoning", comp.CapErr)
	case comp.ReasoningTokens > CapTokens+CapSlack:
		ck.Detail = fmt.Sprintf("the server accepted reasoning_end at %d tokens but the thinking went on to %d: the cap has no effect; see docs/runbook.md#verify-reasoning", CapTokens, comp.ReasoningTokens)
	case comp.Message.Content == "" && after <= 0:
		ck.Detail = fmt.Sprintf("the thinking stopped at %d tokens but no answer followed (finish_reason %q); see docs/runbook.md#verify-reasoning", comp.ReasoningTokens, comp.FinishReason)
	default:
		ck.Status = Pass
		ck.Detail = fmt.Sprintf("cap %d: thinking ended at %d tokens, then %d tokens of answer (finish_reason %q)", CapTokens, comp.ReasoningTokens, after, comp.FinishReason)
	}
	return ck
}
