// Package selftest is the startup self-test of the inference path (the
// brief's inference contract, items 9 and 10), shared by loopd, which
// refuses to start unless every check passes, and by bxctl, which runs it
// straight against a llama-server URL (`bxctl selftest`, `bxctl
// verify-device`, and the serving checks of `bxctl doctor`).
//
// Invariant: [Run] reports a check as passed only when it saw the figure
// the check is about, on the client's own slot, through the same client
// loopd uses; a check that could not observe its figure fails and says
// why. Every failure names its runbook entry. Run never edits the server's
// settings: it reads /props and /slots, counts the baseline's tokens
// (input_tokens, nothing generated) and sends three short chat requests
// on the client's slot. Against a llama-server router whose model is
// unloaded (an idle router unloads it) Run first has the router load it
// and waits within the model-load limit, so that a loopd started then
// comes up; every other request asks with autoload=false, and
// [Serving], the read-only audit, never loads anything.
package selftest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
)

// Expect holds the serving settings the owner recorded (they are set in
// the owner's NixOS configuration, not here). A zero field was not
// recorded and is reported, not compared.
type Expect struct {
	NCtx           int    // per-slot context, tokens
	Slots          int    // total slots
	TemplateSHA256 string // hex SHA-256 of the chat template the server reports
	OtherSlots     []int  // further slots the deployment pins requests to; each must exist
	// Baseline is the first request of a session without its first
	// message (the system message and the tools array): the fit check
	// counts it. Nil: the check counts a one-line system message alone.
	Baseline *Baseline
}

// Baseline is what every session's requests start with.
type Baseline struct {
	Messages []chat.Message
	Tools    []chat.Tool
}

// FitMargin is the room, in tokens, a slot must leave beyond the
// baseline and max_tokens: the first message and a short tool exchange
// (docs/decisions.md). A slot with less would refuse or cut the first
// turns, so the self-test refuses it instead.
const FitMargin = 1024

// Check is one line of the report.
type Check struct {
	Name   string
	OK     bool
	Detail string // the figures seen; for a failure, why, ending in a runbook pointer
}

// Report is the outcome of Run, in the order the checks ran.
type Report struct {
	Checks []Check
	// NCtx is the per-slot context /props reported (0 if the server did
	// not answer): loopd sizes its sessions by it.
	NCtx int
	// Vision is /props modalities.vision: the model was loaded with a
	// vision projector (llama-server's --mmproj) and reads image parts.
	// loopd tells the owner when an image cannot reach the model.
	Vision bool
}

// OK reports whether every check passed.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return len(r.Checks) > 0
}

// Failed lists the failed checks' names.
func (r Report) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// The check names, in order.
const (
	CheckServer   = "server"
	CheckContext  = "context"
	CheckSettings = "settings"
	CheckToolCall = "tool-call"
	CheckCache    = "cache"
	CheckFit      = "fit"
)

// Run runs every check against c with slot as the client's slot (the one
// loopd's sessions use). A check that depends on an earlier one that
// failed is reported as failed with the reason.
func Run(ctx context.Context, c *llama.Client, slot int, exp Expect) Report {
	loaded, err := c.EnsureLoaded(ctx)
	if err != nil {
		anchor, why := "selftest-server", "the server did not answer"
		if errors.As(err, new(*llama.LoadError)) {
			anchor, why = "selftest-model-load", "the model is not loaded"
		}
		r := Report{Checks: []Check{{Name: CheckServer, Detail: fmt.Sprintf("%v; see docs/runbook.md#%s", err, anchor)}}}
		for _, n := range []string{CheckContext, CheckSettings, CheckFit, CheckToolCall, CheckCache} {
			r.Checks = append(r.Checks, Check{Name: n, Detail: "not run: " + why})
		}
		return r
	}
	r := Serving(ctx, c, slot, exp)
	switch loaded {
	case llama.LoadedByUs:
		r.Checks[0].Detail += "; the router had the model unloaded and loaded it for this self-test"
	case llama.LoadedByPeer:
		r.Checks[0].Detail += "; the router was loading the model, and the self-test waited for it"
	}
	if !r.Checks[0].OK {
		for _, n := range []string{CheckFit, CheckToolCall, CheckCache} {
			r.Checks = append(r.Checks, Check{Name: n, Detail: "not run: the server did not answer"})
		}
		return r
	}
	r.Checks = append(r.Checks, fitCheck(ctx, c, r.NCtx, exp.Baseline))
	r.Checks = append(r.Checks, toolCallCheck(ctx, c))
	r.Checks = append(r.Checks, cacheCheck(ctx, c))
	return r
}

// Serving runs only the checks that read the server (server, context and
// settings: /health, /props and /slots), never a completion, so that a
// read-only audit (`bxctl doctor`) can compare the serving settings with
// the recorded ones without spending the model's time. Its first check
// is always [CheckServer].
func Serving(ctx context.Context, c *llama.Client, slot int, exp Expect) Report {
	var r Report
	add := func(name string, ok bool, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	props, err := serverUp(ctx, c)
	if err != nil {
		add(CheckServer, false, "%v; see docs/runbook.md#selftest-server", err)
		for _, n := range []string{CheckContext, CheckSettings} {
			add(n, false, "not run: the server did not answer")
		}
		return r
	}
	see := "no"
	if props.Modalities.Vision {
		see = "yes"
	}
	add(CheckServer, true, "health ok; build %s, model %q; vision %s", props.BuildInfo, props.ModelAlias, see)
	slots, slotsErr := c.Slots(ctx)
	r.NCtx, r.Vision = props.SlotContext(), props.Modalities.Vision
	r.Checks = append(r.Checks, contextCheck(props, slots, slotsErr, slot, exp))
	r.Checks = append(r.Checks, settingsCheck(props, slots, slotsErr, exp))
	return r
}

func serverUp(ctx context.Context, c *llama.Client) (*llama.Props, error) {
	if err := c.Health(ctx); err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	p, err := c.Props(ctx)
	if err != nil {
		return nil, fmt.Errorf("props: %w", err)
	}
	if p.Role == "router" {
		return nil, errors.New("props: the router answered for itself; name the model so the child answers")
	}
	return p, nil
}

// contextCheck: the configured per-slot context matches /props, and every
// slot in /slots has that context.
func contextCheck(p *llama.Props, slots []llama.Slot, slotsErr error, slot int, exp Expect) Check {
	c := Check{Name: CheckContext}
	n := p.SlotContext()
	var problems []string
	if n <= 0 {
		problems = append(problems, fmt.Sprintf("/props reports a per-slot context of %d", n))
	}
	if exp.NCtx != 0 && exp.NCtx != n {
		problems = append(problems, fmt.Sprintf("configured %d tokens per slot, /props reports %d", exp.NCtx, n))
	}
	if slotsErr != nil {
		problems = append(problems, fmt.Sprintf("/slots: %v", slotsErr))
	}
	for _, s := range slots {
		if s.NCtx != n {
			problems = append(problems, fmt.Sprintf("slot %d has %d tokens, /props says %d", s.ID, s.NCtx, n))
		}
	}
	for _, id := range append([]int{slot}, exp.OtherSlots...) {
		if slotsErr == nil && (id < 0 || id >= len(slots)) {
			problems = append(problems, fmt.Sprintf("the configured slot %d does not exist (the server has %d)", id, len(slots)))
		}
	}
	if len(problems) > 0 {
		c.Detail = strings.Join(problems, "; ") + "; see docs/runbook.md#selftest-context"
		return c
	}
	c.OK = true
	if exp.NCtx == 0 {
		c.Detail = fmt.Sprintf("%d tokens per slot on %d slots (no configured value to compare)", n, len(slots))
	} else {
		c.Detail = fmt.Sprintf("%d tokens per slot, as configured, on %d slots", n, len(slots))
	}
	return c
}

// fitCheck: the baseline, as the server counts it, plus max_tokens plus
// FitMargin fits the slot's context. Without it every turn would fail on
// the server's exceed_context_size_error (issue 19).
func fitCheck(ctx context.Context, c *llama.Client, nCtx int, b *Baseline) Check {
	ck := Check{Name: CheckFit}
	what := "the baseline (system message, tools, a one-word message)"
	if b == nil {
		what = "a one-line system message and a one-word message (no baseline given)"
		b = &Baseline{Messages: []chat.Message{{Role: chat.RoleSystem, Content: "You are a self-test."}}}
	}
	// The first request is the baseline plus a message, and chat templates
	// refuse a conversation with no user message: count the shortest one.
	msgs := append(slices.Clip(b.Messages), chat.Message{Role: chat.RoleUser, Content: "Hello."})
	n, err := c.InputTokens(ctx, llama.Request{Messages: msgs, Tools: b.Tools})
	if err != nil {
		ck.Detail = fmt.Sprintf("could not count %s: %v; see docs/runbook.md#selftest-fit", what, err)
		return ck
	}
	need := n + c.MaxTokens() + FitMargin
	if nCtx <= 0 || need > nCtx {
		ck.Detail = fmt.Sprintf("%s is %d tokens; with max_tokens %d and a working margin of %d that needs %d, and a slot holds %d: every turn would overflow; see docs/runbook.md#selftest-fit",
			what, n, c.MaxTokens(), FitMargin, need, nCtx)
		return ck
	}
	ck.OK = true
	ck.Detail = fmt.Sprintf("%s is %d tokens; with max_tokens %d and a margin of %d, %d of the slot's %d tokens", what, n, c.MaxTokens(), FitMargin, need, nCtx)
	return ck
}

// settingsCheck: the recorded serving settings (brief, contract item 10)
// against what the server reports. The KV cache type is not reported by
// llama-server; it is checked on the inference host (verify-device).
func settingsCheck(p *llama.Props, slots []llama.Slot, slotsErr error, exp Expect) Check {
	c := Check{Name: CheckSettings}
	sum := sha256.Sum256([]byte(p.ChatTemplate))
	hash := hex.EncodeToString(sum[:])
	var problems, seen []string
	seen = append(seen, fmt.Sprintf("template sha256 %s", hash[:16]), fmt.Sprintf("%d slots", p.TotalSlots))
	if p.ChatTemplate == "" {
		problems = append(problems, "/props reports no chat template")
	}
	if exp.TemplateSHA256 != "" && !strings.EqualFold(exp.TemplateSHA256, hash) {
		problems = append(problems, fmt.Sprintf("chat template sha256 is %s, recorded %s", hash, exp.TemplateSHA256))
	}
	if exp.Slots != 0 && exp.Slots != p.TotalSlots {
		problems = append(problems, fmt.Sprintf("server has %d slots, recorded %d", p.TotalSlots, exp.Slots))
	}
	if slotsErr == nil && len(slots) != p.TotalSlots {
		problems = append(problems, fmt.Sprintf("/slots lists %d slots, /props says %d", len(slots), p.TotalSlots))
	}
	for _, s := range slots {
		if s.Speculative {
			problems = append(problems, fmt.Sprintf("slot %d uses speculative decoding, recorded off", s.ID))
		}
	}
	if slotsErr == nil {
		seen = append(seen, "no speculative decoding")
	}
	if len(problems) > 0 {
		c.Detail = strings.Join(problems, "; ") + "; see docs/runbook.md#selftest-settings"
		return c
	}
	c.OK = true
	c.Detail = strings.Join(seen, ", ")
	if exp.TemplateSHA256 == "" && exp.Slots == 0 {
		c.Detail += " (nothing recorded to compare)"
	}
	return c
}

// The self-test's conversations are short and deterministic whatever the
// client's settings: greedy sampling (so a reply re-tokenises as it was
// sampled) and bounded replies (a tiny model never stops by itself, and
// two long turns would overflow a small slot). The tool call gets room
// for a thinking model to reason first.
var (
	greedy        = &llama.Sampling{Temperature: 0, TopP: 1, TopK: 1}
	toolMaxTokens = 1024
	turnMaxTokens = 256
)

var clockTool = chat.NewTool("clock", "Returns the current time. Takes no arguments.", json.RawMessage(`{"type":"object","properties":{},"required":[]}`))

// toolCallCheck: the model calls a declared tool and the server's parser
// returns a well-formed call.
func toolCallCheck(ctx context.Context, c *llama.Client) Check {
	ck := Check{Name: CheckToolCall}
	comp, err := c.Complete(ctx, llama.Request{
		Messages: []chat.Message{
			{Role: chat.RoleSystem, Content: "You are a self-test. Call the clock tool."},
			{Role: chat.RoleUser, Content: "What time is it? Use the clock tool."},
		},
		Tools:      []chat.Tool{clockTool},
		ToolChoice: "required",
		MaxTokens:  toolMaxTokens,
		Sampling:   greedy,
	}, llama.SlotState{})
	if err != nil {
		ck.Detail = fmt.Sprintf("completion failed: %v; see docs/runbook.md#selftest-tool-call", err)
		return ck
	}
	calls := comp.Message.ToolCalls
	if len(calls) == 0 {
		ck.Detail = fmt.Sprintf("the model answered without calling the tool (finish_reason %q, %d tokens); a tiny test model never reaches a tool call, the deployed model must; see docs/runbook.md#selftest-tool-call", comp.FinishReason, comp.Usage.CompletionTokens)
		return ck
	}
	tc := calls[0]
	var args map[string]json.RawMessage
	switch {
	case tc.Function.Name != "clock":
		ck.Detail = fmt.Sprintf("the model called %q, not the declared clock tool; see docs/runbook.md#selftest-tool-call", tc.Function.Name)
	case tc.ID == "":
		ck.Detail = "the tool call has no id; see docs/runbook.md#selftest-tool-call"
	case json.Unmarshal([]byte(tc.Function.Arguments), &args) != nil:
		ck.Detail = fmt.Sprintf("the tool call's arguments are not a JSON object: %q; see docs/runbook.md#selftest-tool-call", tc.Function.Arguments)
	case comp.FinishReason != "tool_calls":
		ck.Detail = fmt.Sprintf("finish_reason is %q with a tool call, want \"tool_calls\"; see docs/runbook.md#selftest-tool-call", comp.FinishReason)
	default:
		ck.OK = true
		ck.Detail = fmt.Sprintf("clock called with %s, id %s", tc.Function.Arguments, tc.ID)
	}
	return ck
}

// cacheCheck: turn 2 of a two-turn exchange on the slot reuses all of
// turn 1 but its last sampled token (which the server never caches).
func cacheCheck(ctx context.Context, c *llama.Client) Check {
	ck := Check{Name: CheckCache}
	msgs := []chat.Message{
		{Role: chat.RoleSystem, Content: "You are a self-test. Answer in one short sentence."},
		{Role: chat.RoleUser, Content: "Say hello."},
	}
	first, err := c.Complete(ctx, llama.Request{Messages: msgs, MaxTokens: turnMaxTokens, Sampling: greedy}, llama.SlotState{})
	if err != nil {
		ck.Detail = fmt.Sprintf("turn 1 failed: %v; see docs/runbook.md#selftest-cache", err)
		return ck
	}
	if first.Timings == nil {
		ck.Detail = "turn 1 reported no timings; see docs/runbook.md#selftest-cache"
		return ck
	}
	msgs = append(msgs, first.Message, chat.Message{Role: chat.RoleUser, Content: "Say it again."})
	second, err := c.Complete(ctx, llama.Request{Messages: msgs, MaxTokens: turnMaxTokens, Sampling: greedy}, first.Slot)
	if err != nil {
		ck.Detail = fmt.Sprintf("turn 2 failed: %v; see docs/runbook.md#selftest-cache", err)
		return ck
	}
	if second.Timings == nil {
		ck.Detail = "turn 2 reported no timings; see docs/runbook.md#selftest-cache"
		return ck
	}
	prev, cached := first.Slot.Total, second.Timings.CacheN
	if second.CacheLoss != nil {
		ck.Detail = fmt.Sprintf("turn 2 reused %d of turn 1's %d tokens (gap %d): turn 2 is not an extension of turn 1 as the server rendered it; does the chat template drop or rewrite earlier thinking blocks? see docs/runbook.md#selftest-cache", cached, prev, second.CacheGap)
		return ck
	}
	ck.OK = true
	ck.Detail = fmt.Sprintf("turn 2 reused %d of turn 1's %d tokens (gap %d) and processed %d new", cached, prev, second.CacheGap, second.Timings.PromptN)
	return ck
}
