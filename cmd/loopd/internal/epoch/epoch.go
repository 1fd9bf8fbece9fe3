// Package epoch changes a session's epoch (the brief's compaction, as
// inference contract item 4 defines it): the model summarises the ending
// epoch, and a new epoch starts whose prefix is the baseline of that
// moment plus the summary.
//
// Invariants:
//   - the summary request is the ending epoch's exact message array (the
//     request its next turn would extend), the same tools array, and one
//     fixed instruction ([Instruction]) as the newest message, on the
//     background slot, capped in tokens; tool calls in its reply are never
//     run, only its text is kept;
//   - it is preceded, on the same slot, by one fixed staging request
//     ([StageMessage], no tools, one token), whose reply is discarded and
//     nothing of which is logged: it only moves the server's prompt cache
//     so that the summary request finds the epoch (see [Changer.stage]);
//   - the summary is neutralised (sanitize.Neutralise) and capped before
//     it is logged, and it is a message of the new epoch, never part of
//     its system message;
//   - the new baseline is built at the change (the identity block read
//     from memoryd again, so approved memory edits take effect here);
//   - the change itself is session.Change: the old epoch's files are never
//     written again, and a crash leaves the old epoch current or the new
//     one complete;
//   - the warm start, if on, only reads the new prefix into the session's
//     slot: its reply is discarded and nothing of it is logged.
//
// Callers (package server) decide when: only with no turn in flight and
// no approval pending, at most once per idle period.
package epoch

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/text/sanitize"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// Instruction is the fixed newest message of every summary request.
const Instruction = "This conversation is about to be compacted: it will continue from a summary instead of the full history. " +
	"Write that summary now, as plain text, without calling any tool: what the owner asked for and why, what was done and found " +
	"(with the names, paths, figures and decisions that matter), what is still open, and anything the owner asked you to remember. " +
	"Say which content came from tools or outside sources. Be complete but brief."

// StageMessage is the one message of the staging request that precedes
// every summary request. Any short text works: what matters is that its
// prompt shares next to nothing with an epoch's (no system message, no
// tools), so it is fixed, and it names its purpose for whoever reads the
// server's log.
const StageMessage = "Prompt-cache staging request before a summary; reply with one word."

// MaxSummaryBytes caps a summary's text as it is logged.
const MaxSummaryBytes = 16 << 10

// Defaults of [Config]'s zero fields.
const (
	DefaultIdleAfter        = 10 * time.Minute
	DefaultCompactAtPercent = 60
	DefaultSummaryMaxTokens = 1024
)

// Model is the part of the llama client a change uses.
type Model interface {
	Complete(ctx context.Context, req llama.Request, prev llama.SlotState) (*llama.Completion, error)
}

// Changer changes epochs. Its fields are set once.
type Changer struct {
	// Summarise is the client on the background slot.
	Summarise Model
	// Warm is the client on the session's slot, for the warm start; nil
	// turns it off.
	Warm Model
	// MaxTokens caps the summary request (the server's max_tokens).
	MaxTokens int
	// NCtx is the slot's context (0: unknown), to leave out of the
	// summary request the turns that would not fit (covered).
	NCtx int
	// Baseline builds epoch's baseline for session id.
	// channel is the session's, which every epoch keeps.
	Baseline func(ctx context.Context, id, channel string, epoch int64) (sessionlog.Baseline, error)
	Log      *slog.Logger
}

// Result is what a change did, for the log and the measurements.
type Result struct {
	Session *session.Session // the new epoch
	Summary *llama.Timings   // the summary request's figures (nil if the server sent none)
	Warm    *llama.Timings   // the warm start's, if it ran
}

// Change summarises s's epoch and, holding mu (which keeps user
// messages from being logged meanwhile), commits the new epoch and calls
// swap with it, in the same critical section, so that nothing is ever
// appended to the old epoch after its successor exists. Messages
// logged while the summary is written belong to a later turn than the
// summary covers, so they move to the new epoch unchanged and become its
// first turn. On an error s stays current.
func (c *Changer) Change(ctx context.Context, s *session.Session, mu sync.Locker, swap func(*session.Session)) (*Result, error) {
	recs := s.Records()
	upTo := session.StateOf(recs).NextTurn - 1
	maxTokens := c.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultSummaryMaxTokens
	}
	covered := upTo
	if c.NCtx > 0 {
		covered = Covered(recs, upTo, c.NCtx-maxTokens-InstructionTokens)
	}
	comp := &llama.Completion{}
	if covered > 0 {
		c.stage(ctx, s)
		msgs := append(s.Messages(covered), chat.Message{Role: chat.RoleUser, Content: Instruction})
		var err error
		comp, err = c.Summarise.Complete(ctx, llama.Request{Messages: msgs, Tools: s.Baseline.Tools, MaxTokens: maxTokens}, llama.SlotState{})
		if err != nil {
			return nil, fmt.Errorf("change epoch: summary: %w", err)
		}
	}
	text := Text(comp.Message.Content+uncovered(recs, covered, upTo, s.Epoch), s.Epoch)
	base, err := c.Baseline(ctx, s.ID, s.Baseline.Channel, s.Epoch+1)
	if err != nil {
		return nil, fmt.Errorf("change epoch: baseline: %w", err)
	}
	mu.Lock()
	sum := sessionlog.Summary{Text: text}
	if t := comp.Timings; t != nil {
		sum.CacheN, sum.PromptN, sum.PredictedN = t.CacheN, t.PromptN, t.PredictedN
	}
	ns, err := s.Change(base, sum, upTo)
	if err == nil {
		swap(ns)
	}
	mu.Unlock()
	if err != nil {
		return nil, err
	}
	res := &Result{Session: ns, Summary: comp.Timings}
	if calls := len(comp.Message.ToolCalls); calls > 0 {
		c.Log.Warn("summary asked for tools; not run", "session", s.ID, "calls", calls)
	}
	if c.Warm != nil {
		res.Warm = c.warm(ctx, ns)
	}
	return res, nil
}

// InstructionTokens is room for the instruction (and its chat-template
// wrapping) in the summary request: it is under 100 tokens in any of the
// served tokenizers; the rest is margin.
const InstructionTokens = 256

// Covered is the last turn the summary request can hold within budget
// tokens: the whole epoch (upTo) if it fits, else the last turn that
// ended with the model's answer (so its last usage record counts every
// message up to it) within the budget, else 0 (nothing fits: no summary
// is asked). Only what the server reported counts: no tokenising here.
// The request stays a prefix of the epoch's array, what the server has
// cached.
func Covered(recs []sessionlog.Record, upTo int64, budget int) int64 {
	total := map[int64]int{}     // the context after each turn's last completion
	answered := map[int64]bool{} // the turn's last message is an answer
	var last int
	for _, r := range recs {
		switch r := r.(type) {
		case *sessionlog.Assistant:
			answered[r.Turn] = len(r.Message.ToolCalls) == 0
		case *sessionlog.ToolResult, *sessionlog.User:
			answered[r.TurnOf()] = false
		case *sessionlog.Usage:
			last = r.CacheN + r.PromptN + r.PredictedN
			total[r.Turn] = last
		}
	}
	if st := session.StateOf(recs); !st.Full && st.Slot.Total <= budget {
		return upTo
	}
	for t := upTo; t > 0; t-- {
		if answered[t] && total[t] > 0 && total[t] <= budget {
			return t
		}
	}
	return 0
}

// uncovered says which turns the summary leaves out (they did not fit
// its request) and quotes the owner's messages in them, so what was
// asked is not lost.
func uncovered(recs []sessionlog.Record, covered, upTo, epoch int64) string {
	if covered >= upTo {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\n(Turns %d to %d of epoch %d did not fit in the summary request, so they are not summarised; their full log is kept. The owner's messages in them were:", covered+1, upTo, epoch)
	for _, r := range recs {
		if u, ok := r.(*sessionlog.User); ok && u.Turn > covered && u.Turn <= upTo {
			fmt.Fprintf(&b, "\n- turn %d: %s", u.Turn, u.Text)
		}
	}
	b.WriteString(")")
	return b.String()
}

// Text is the summary as logged: the model's text, trimmed, neutralised
// and capped; a fixed line if the model wrote none (a thinking model may
// spend the whole cap thinking), so the session still goes on.
func Text(content string, epoch int64) string {
	t := strings.TrimSpace(sanitize.Neutralise(content))
	if t == "" {
		return fmt.Sprintf("(The model wrote no summary of epoch %d; its full log is kept as %s.)", epoch, layout.EpochRel("<id>", epoch))
	}
	t, _ = truncate.Bytes(t, MaxSummaryBytes)
	return t
}

// stage sends the staging request on the background slot, just before
// the summary request, so that llama-server's host-RAM prompt cache
// (--cache-ram, on by default, with --cache-idle-slots, also on) gives
// the summary request the ending epoch, which is in the session's slot,
// not in the background slot (reference §7; llama.cpp 3f545becc,
// tools/server/server-context.cpp). It does two things there:
//   - launching any task saves every idle slot into the prompt cache
//     (server-context.cpp:2309-2323), and the session's slot is idle at an
//     epoch change (unless another session's turn holds the shared slot),
//     so the epoch as the slot holds it is saved now (the epoch's own
//     turns ran with that slot busy, so nothing saved it then);
//   - a slot asked for by id restores the best-matching cache entry only
//     when it would keep under half of what it holds (f_keep < 0.5, or a
//     similarity under --slot-prompt-similarity 0.1, and never when it is
//     empty: server-context.cpp:1443-1556). A background slot holding a
//     prompt with the same baseline (a job's, another summary's) keeps
//     more than half of it, so the summary would re-read the epoch past
//     the baseline; holding anything else, it would look in the cache
//     before the epoch is there. After the staging request it holds
//     only this short prompt, which the summary does not share, so the
//     summary's request restores the epoch (server-task.cpp:1793-1867)
//     and reads only the instruction.
//
// It is best effort: a failure costs only the re-read it meant to save,
// and the summary request, which then fails too if the server is gone,
// says so.
func (c *Changer) stage(ctx context.Context, s *session.Session) {
	msgs := []chat.Message{{Role: chat.RoleUser, Content: StageMessage}}
	if _, err := c.Summarise.Complete(ctx, llama.Request{Messages: msgs, MaxTokens: 1}, llama.SlotState{}); err != nil {
		c.Log.Warn("summary staging request failed", "session", s.ID, "epoch", s.Epoch, "err", err.Error())
	}
}

// warm sends the new epoch's prefix to the session's slot so that its
// first turn finds it cached. It is best effort: a failure costs only
// the re-read it meant to save.
func (c *Changer) warm(ctx context.Context, s *session.Session) *llama.Timings {
	st := session.StateOf(s.Records())
	msgs := s.Messages(st.NextTurn - 1) // baseline and summary: no waiting message
	comp, err := c.Warm.Complete(ctx, llama.Request{Messages: msgs, Tools: s.Baseline.Tools, MaxTokens: 1}, llama.SlotState{})
	if err != nil {
		c.Log.Warn("warm start failed", "session", s.ID, "epoch", s.Epoch, "err", err.Error())
		return nil
	}
	if t := comp.Timings; t != nil {
		c.Log.Info("warm start", "session", s.ID, "epoch", s.Epoch, "cache_n", t.CacheN, "prompt_n", t.PromptN)
	}
	return comp.Timings
}
