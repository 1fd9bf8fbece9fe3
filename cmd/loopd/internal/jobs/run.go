package jobs

import (
	"context"
	"fmt"
	"os"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// Runner runs each job as a session of its own: a new session log under
// sessions/, a fresh baseline (identity from memoryd, like any new
// session), one turn on the engine it is given, which calls the model
// on the background slot and sends every tool call to brokerd.
type Runner struct {
	State    string       // the state directory; the run's session goes under sessions/
	Engine   *turn.Engine // Model is the background slot's client
	Baseline func(id string) (sessionlog.Baseline, error)
}

// Run implements [RunFunc].
func (r *Runner) Run(ctx context.Context, j Job, run *wire.JobRun) {
	prompt := j.Prompt
	if j.Build != nil {
		var err error
		if prompt, err = j.Build(ctx, run.Session); err != nil {
			run.Outcome, run.Reason = wire.JobFailed, cut(err.Error())
			return
		}
	}
	s, err := session.Open(r.State, run.Session, func() (sessionlog.Baseline, error) { return r.Baseline(run.Session) })
	if err != nil {
		run.Outcome, run.Reason = wire.JobFailed, "the run's session could not start: "+err.Error()
		return
	}
	defer s.Close()
	text := fmt.Sprintf("This is run %d of the owner's scheduled job %q (%s). No one is reading along: answer in full; the answer is the run's report.\n\n%s",
		run.Run, j.Name, j.Schedule, prompt)
	if err := s.Append(&sessionlog.User{Turn: 1, Text: text}); err != nil {
		run.Outcome, run.Reason = wire.JobFailed, "the run's message could not be logged: "+err.Error()
		return
	}
	e := *r.Engine // the caps apply to this run only
	if j.Caps.MaxCalls > 0 {
		e.Limits.MaxCalls = j.Caps.MaxCalls
	}
	if j.Caps.ToolResultCap > 0 {
		e.Limits.ResultCap = j.Caps.ToolResultCap
	}
	err = e.Run(ctx, s, 1, func(v strict.Variant) {
		switch v := v.(type) {
		case *wire.ToolDenied:
			if len(run.Denied) < MaxDenied {
				run.Denied = append(run.Denied, cut(v.Tool+": "+v.Reason))
			}
		case *wire.Answer:
			run.Outcome, run.Text = wire.JobAnswered, cut(v.Text)
		case *wire.Stopped:
			run.Outcome, run.Reason = wire.JobStopped, cut(string(v.Reason)+": "+v.Msg)
		}
	})
	switch {
	case err != nil && ctx.Err() != nil:
		// The turn stays open in the log; the next loopd closes it as
		// interrupted when anything opens the session again.
		run.Outcome, run.Reason = wire.JobInterrupted, "loopd stopped during the run"
	case err != nil:
		run.Outcome, run.Reason = wire.JobFailed, cut(err.Error())
	}
}

// MaxDenied caps the refused calls a run's record lists.
const MaxDenied = 16

func cut(s string) string {
	s, _ = truncate.Bytes(s, MaxRunText)
	return s
}

// CloseInterrupted closes the open turn of a run a stopped loopd left
// under way (its missing tool results marked interrupted, never re-run),
// as any session's is closed when it is next opened; a run that never
// got a log has nothing to close.
func (r *Runner) CloseInterrupted(id string) error {
	if _, err := os.Lstat(session.Dir(r.State, id)); err != nil {
		return nil
	}
	s, err := session.Open(r.State, id, func() (sessionlog.Baseline, error) {
		return sessionlog.Baseline{}, fmt.Errorf("session %s has no baseline", id)
	})
	if err != nil {
		return err
	}
	defer s.Close()
	return turn.Interrupted(s)
}
