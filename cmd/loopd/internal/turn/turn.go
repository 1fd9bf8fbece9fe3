// Package turn runs one turn of a session: it asks the model, carries out
// the tool calls the model makes (clock and find_tool in loopd, everything
// else through brokerd), and stops the turn when it runs away.
//
// Invariants:
//   - every model request is [sessionlog.Replay] of the log (through
//     [session.Session.Messages], which keeps it incrementally and equals
//     it), with its images loaded, or dropped for a model that cannot
//     see, the same way every time (images.go): the engine never builds a
//     message any other way, so each request is an exact extension of the
//     previous one (what the server has cached), and the llama client can
//     encode only what is new;
//   - every record is on disk before the event that reports it is sent;
//   - a turn ends in exactly one of: an answer, a stop by runaway control
//     (tool-iteration cap, repeated identical calls; the thinking cap ends
//     only the thinking, never the turn), a session_full stop (the next
//     request would not fit the slot, by the server's refusal or by the
//     last usage record plus max_tokens), or an error; all but the last are logged with a TurnEnd, and every tool
//     call the model made has its result record before the stop;
//   - the engine decides nothing about authority.
package turn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/broker"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/tools"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Model is the part of the llama client the engine uses.
type Model interface {
	Complete(ctx context.Context, req llama.Request, prev llama.SlotState) (*llama.Completion, error)
}

// Limits are the per-turn runaway limits.
type Limits struct {
	MaxCalls    int // model calls in one turn
	RepeatLimit int // the same tool call (name and arguments) this many times stops the turn
	ResultCap   int // bytes of one tool result, applied when it is logged
}

// Context is the slot's size, for the session_full check before each
// request. A zero NCtx is unknown: only the server's refusal counts.
type Context struct {
	NCtx      int // per-slot context, tokens (the self-test's /props figure)
	MaxTokens int // max_tokens each request may generate
}

// DefaultLimits are used for zero fields.
var DefaultLimits = Limits{MaxCalls: 12, RepeatLimit: 3, ResultCap: 16 << 10}

// Engine runs turns. Its fields are set once.
type Engine struct {
	Model   Model
	Broker  broker.Port
	Limits  Limits
	Context Context
	Now     func() time.Time
	// Ended, if set, is told of each turn once its TurnEnd is on disk and
	// its final event is sent (memoryd indexes it from the log): the
	// owner's answer never waits on memory. It must not fail the turn:
	// errors are its own to report.
	Ended func(s *session.Session, turn int64)
	// Vision is whether the model can see (the self-test's reading of
	// /props); Media loads a posted image. Without both, no image part
	// is sent (images.go).
	Vision bool
	Media  Media
}

// Emit sends one event to whoever follows the turn.
type Emit func(strict.Variant)

// Run runs turn t of s to its end. It returns an error only when the turn
// could not be carried on (the model failed, or the log could not be
// written); the caller reports it.
func (e *Engine) Run(ctx context.Context, s *session.Session, t int64, emit Emit) error {
	lim := e.limits()
	seen := map[string]int{}
	for call := 0; ; call++ {
		emit(&wire.Working{Session: s.ID})
		if call == lim.MaxCalls {
			return e.stop(s, t, emit, nil, wire.StopToolIterations,
				fmt.Sprintf("the model asked for tools %d times in one turn without answering; the turn was stopped", lim.MaxCalls))
		}
		slot := s.Slot()
		if why := e.full(slot, s.Full()); why != "" {
			return e.stop(s, t, emit, nil, wire.StopSessionFull, why)
		}
		comp, err := e.Model.Complete(ctx, llama.Request{
			Messages: e.withImages(s.ID, s.Messages(t)),
			Tools:    s.Baseline.Tools,
			OnEvent: func(ev llama.Event) {
				if ev.Kind == llama.EventReasoning {
					emit(&wire.Reasoning{Session: s.ID, Text: ev.Text})
				}
			},
		}, slot)
		if se := (*llama.ServerError)(nil); errors.As(err, &se) && se.ExceedsContext() {
			// The server's refusal is the owner's session_full, never an
			// internal error: every call so far has its result.
			return e.stop(s, t, emit, nil, wire.StopSessionFull,
				fullMsg(fmt.Sprintf("the request was %d tokens and the slot holds %d", se.NPromptTokens, se.NCtx)))
		}
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		if err := e.logCompletion(s, t, comp); err != nil {
			return err
		}
		// A thinking cap that fired has already ended the thinking (the
		// client sent reasoning_end mid-stream; the usage record says so):
		// what the model wrote after it, answer or calls, goes on as in
		// any turn (Inference contract 8, decision P4).
		calls := comp.Message.ToolCalls
		if len(calls) == 0 {
			if err := s.Append(&sessionlog.TurnEnd{Turn: t}); err != nil {
				return err
			}
			// The owner's answer goes first; memoryd hears of the turn
			// after, so a slow memory path never holds the reply up.
			emit(&wire.Answer{Session: s.ID, Turn: t, Text: comp.Message.Content, Files: posted(s, t)})
			e.ended(s, t)
			return nil
		}
		for _, c := range calls {
			key := c.Function.Name + "\x00" + c.Function.Arguments
			seen[key]++
			if seen[key] >= lim.RepeatLimit {
				return e.stop(s, t, emit, calls, wire.StopRepeatedCall,
					fmt.Sprintf("the model called %s with the same arguments %d times in one turn; the turn was stopped", c.Function.Name, seen[key]))
			}
		}
		for _, c := range calls {
			if err := e.runCall(ctx, s, t, c, emit); err != nil {
				return err
			}
		}
	}
}

// full says why the next request cannot fit the slot, or "": a turn of
// this epoch already ended full, or the context after the last completion
// plus max_tokens is over the slot (the next request is at least that
// long, since every request extends the previous one).
func (e *Engine) full(slot llama.SlotState, full bool) string {
	switch c := e.Context; {
	case full:
		return "this session's context filled in an earlier turn and the change to a new epoch did not happen, so this message is kept in the log but not answered here; " + nextStep
	case c.NCtx > 0 && slot.Total+c.MaxTokens > c.NCtx:
		return fullMsg(fmt.Sprintf("%d tokens are in use and a reply may take %d more, over the slot's %d", slot.Total, c.MaxTokens, c.NCtx))
	}
	return ""
}

// nextStep is what happens next to a full session.
const nextStep = "the session goes on in a new epoch, from a summary of this one, when it is next idle or at your next message; see docs/runbook.md#session-full"

func fullMsg(figures string) string {
	return "this session's context is full (" + figures + "), so the turn was stopped; " + nextStep
}

func (e *Engine) ended(s *session.Session, t int64) {
	if e.Ended != nil {
		e.Ended(s, t)
	}
}

func (e *Engine) limits() Limits {
	l := e.Limits
	if l.MaxCalls <= 0 {
		l.MaxCalls = DefaultLimits.MaxCalls
	}
	if l.RepeatLimit <= 0 {
		l.RepeatLimit = DefaultLimits.RepeatLimit
	}
	if l.ResultCap <= 0 {
		l.ResultCap = DefaultLimits.ResultCap
	}
	return l
}

// logCompletion writes the assistant message, its usage and any cache loss.
func (e *Engine) logCompletion(s *session.Session, t int64, c *llama.Completion) error {
	if err := s.Append(&sessionlog.Assistant{Turn: t, Message: c.Message}); err != nil {
		return err
	}
	u := &sessionlog.Usage{Turn: t, PromptTokens: c.Usage.PromptTokens, ReasoningTokens: c.ReasoningTokens, CapFired: c.CapFired, CapAt: c.CapAt, CacheGap: c.CacheGap}
	if c.CapErr != nil {
		u.CapRefused = c.CapErr.Error()
	}
	if tm := c.Timings; tm != nil {
		u.CacheN, u.PromptN, u.PredictedN = tm.CacheN, tm.PromptN, tm.PredictedN
		u.PromptUS, u.PredictedUS = int64(tm.PromptMS*1000), int64(tm.PredictedMS*1000)
	}
	if err := s.Append(u); err != nil {
		return err
	}
	if l := c.CacheLoss; l != nil {
		return s.Append(&sessionlog.CacheLoss{Turn: t, Tokens: l.Tokens, PrevTotal: l.PrevTotal, Cached: l.Cached})
	}
	return nil
}

// stop ends the turn by runaway control: calls the model made but that
// will not run get a not_run result (every call needs an answer in the
// conversation), then the stop and the turn's end are logged.
func (e *Engine) stop(s *session.Session, t int64, emit Emit, calls []chat.ToolCall, why wire.StopReason, msg string) error {
	for _, c := range calls {
		r := &sessionlog.ToolResult{Turn: t, CallID: c.ID, Tool: c.Function.Name, Status: wire.StatusNotRun, Content: "the turn was stopped: " + string(why), Label: dataclass.Label{Class: dataclass.Public}}
		if err := s.Append(r); err != nil {
			return err
		}
	}
	if err := s.Append(&sessionlog.Stopped{Turn: t, Reason: why, Msg: msg}); err != nil {
		return err
	}
	if err := s.Append(&sessionlog.TurnEnd{Turn: t}); err != nil {
		return err
	}
	emit(&wire.Stopped{Session: s.ID, Turn: t, Reason: why, Msg: msg})
	e.ended(s, t)
	return nil
}

// runCall carries out one tool call and logs its result.
func (e *Engine) runCall(ctx context.Context, s *session.Session, t int64, c chat.ToolCall, emit Emit) error {
	r := &sessionlog.ToolResult{Turn: t, CallID: c.ID, Tool: c.Function.Name, Label: dataclass.Label{Class: dataclass.Public}}
	switch name := c.Function.Name; {
	case name == toolset.Clock:
		emit(&wire.ToolRunning{Session: s.ID, CallID: c.ID, Tool: toolset.Clock})
		e.local(r, func() (string, error) { return tools.Now(c.Function.Arguments, e.now()) })
	case name == toolset.FindTool:
		emit(&wire.ToolRunning{Session: s.ID, CallID: c.ID, Tool: toolset.FindTool})
		e.local(r, func() (string, error) { return tools.Find(c.Function.Arguments, e.pinnedTools(ctx)) })
	case tools.ToBroker(name, s.Baseline.Tools):
		target, err := tools.ParseCall(c.Function.Arguments)
		if name != toolset.CallTool {
			target, err = tools.MemoryCall(name, c.Function.Arguments)
		}
		if err != nil {
			r.Status, r.Content = wire.StatusFailed, err.Error()
			break
		}
		r.Tool = target.Name
		emit(&wire.ToolRunning{Session: s.ID, CallID: c.ID, Tool: target.Name})
		out := e.Broker.Call(ctx, wire.ToolRequest{Session: s.ID, CallID: c.ID, Tool: target.Name, Arguments: target.Arguments, Epoch: s.Epoch},
			func(id int64) {
				if s.Append(&sessionlog.Approval{Turn: t, CallID: c.ID, ID: id, State: "pending"}) == nil {
					emit(&wire.ApprovalPending{Session: s.ID, CallID: c.ID, Tool: target.Name, ID: id})
				}
			})
		r.Status, r.Content, r.Label, r.Posted = out.Status, out.Output, out.Label, out.Posted
		if out.Status == wire.StatusDenied {
			emit(&wire.ToolDenied{Session: s.ID, CallID: c.ID, Tool: target.Name, Reason: out.Output})
		}
		if !r.Class.Valid() {
			// An unlabelled result is treated as the most restricted.
			r.Class = dataclass.Secret
		}
	default:
		// The server's grammar only produces declared tools; this is a
		// guard, not a path.
		r.Status, r.Content = wire.StatusFailed, fmt.Sprintf("there is no tool %q in this conversation", c.Function.Name)
	}
	// Cut once, when the result is first logged; the log keeps the cut
	// text for ever.
	r.Content, r.Truncated = truncate.Bytes(r.Content, e.limits().ResultCap)
	return s.Append(r)
}

// posted are the files post_file put in outbox/ during turn t, in
// order, at most wire.MaxFiles (a post holds no more).
func posted(s *session.Session, t int64) []wire.PostedFile {
	var out []wire.PostedFile
	for _, r := range s.Records() {
		if tr, ok := r.(*sessionlog.ToolResult); ok && tr.Turn == t && tr.Posted != nil && len(out) < wire.MaxFiles {
			out = append(out, *tr.Posted)
		}
	}
	return out
}

func (e *Engine) local(r *sessionlog.ToolResult, f func() (string, error)) {
	out, err := f()
	if err != nil {
		r.Status, r.Content = wire.StatusFailed, err.Error()
		return
	}
	r.Status, r.Content = wire.StatusRan, out
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Interrupted closes a turn that a previous loopd left open: every call
// without a result gets an "interrupted" result (nothing is re-run: a tool
// may have had effects), then the stop and the turn's end are logged, all
// with that turn's number so replay keeps them with it.
func Interrupted(s *session.Session) error {
	st := session.StateOf(s.Records())
	t := st.Interrupted
	if t == 0 {
		return nil
	}
	var errs []error
	for _, c := range st.Pending {
		errs = append(errs, s.Append(&sessionlog.ToolResult{Turn: t, CallID: c.ID, Tool: c.Function.Name, Status: wire.StatusInterrupted,
			Content: "loopd stopped before the result came; the call may or may not have run", Label: dataclass.Label{Class: dataclass.Public}}))
	}
	errs = append(errs,
		s.Append(&sessionlog.Stopped{Turn: t, Reason: wire.StopInterrupted, Msg: "loopd stopped during this turn"}),
		s.Append(&sessionlog.TurnEnd{Turn: t}))
	return errors.Join(errs...)
}

// Unanswered closes a turn whose messages a previous loopd logged and
// never answered: it stopped before anything of the turn but the messages
// was logged (during the turn's first model call, or before a queued turn
// began), so [Interrupted] does not see it as started. The messages stay
// in the log, part of the conversation the next turn replays; the stop is
// the turn's outcome, so whoever asks for it (gatewayd's answers_since)
// is told instead of waiting for an answer that never comes. Call it
// after Interrupted, while no turn of the session runs.
func Unanswered(s *session.Session) error {
	t := session.StateOf(s.Records()).Waiting
	if t == 0 {
		return nil
	}
	return errors.Join(
		s.Append(&sessionlog.Stopped{Turn: t, Reason: wire.StopInterrupted, Msg: UnansweredMsg}),
		s.Append(&sessionlog.TurnEnd{Turn: t}))
}

// UnansweredMsg is the stop message of a turn closed by [Unanswered].
const UnansweredMsg = "loopd stopped before this message was answered; it stays in the conversation, and the next message goes with it"
