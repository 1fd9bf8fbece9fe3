package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// RunFunc carries out one run of j in run.Session, filling run's
// outcome, reason, text and refused calls (Ended is the scheduler's).
// It returns when the run has ended; ctx ends it early (loopd stopping).
type RunFunc func(ctx context.Context, j Job, run *wire.JobRun)

// Scheduler runs the owner's jobs. Its fields are set before [Start].
type Scheduler struct {
	Dir    string // the jobs directory (layout.Jobs)
	State  string // loopd's record of runs (layout.LoopJobs)
	Owners ownership.Owners
	Limits Limits
	Now    func() time.Time // the clock; time.Now if nil
	Run    RunFunc
	Log    *slog.Logger
	// Poll is how often the directory is read again (edits, new and
	// deleted files); 15 s if zero. A run is also started on time
	// between polls.
	Poll time.Duration
	// Exists reports whether a session's log is already there; a run
	// never reuses one (after a lost record, run numbers skip past the
	// sessions that are left). Nil: none is.
	Exists func(session string) bool
	// Interrupted, if set, closes the log of a run a previous loopd left
	// under way (Runner.CloseInterrupted); an error is logged.
	Interrupted func(session string) error
	// Builtin are jobs of loopd's own (the tiering job), scheduled like
	// the files' jobs.
	Builtin []Job

	mu      sync.Mutex // guards the fields below
	st      *stateFile
	jobs    []Job
	refused []Refused
	logged  map[string]string // file -> the refusal last logged, so each is logged once
	started time.Time         // the first tick: slots before it were missed while loopd was down
	written []byte            // the record as last written, so an unchanged one is not rewritten
}

// DefaultPoll is how often the jobs directory is read again.
const DefaultPoll = 15 * time.Second

// Start reads loopd's record of runs, closing as interrupted a run a
// previous loopd left under way. A record that cannot be read refuses
// the start: the scheduler must not forget what it ran.
func (s *Scheduler) Start() error {
	if err := os.MkdirAll(filepath.Dir(s.State), 0o700); err != nil {
		return fmt.Errorf("job record: %w", err)
	}
	st, err := readState(s.State)
	if err != nil {
		return err
	}
	changed := false
	for i := range st.Jobs {
		l := st.Jobs[i].Last
		if l != nil && l.Outcome == wire.JobRunning {
			l.Outcome, l.Reason = wire.JobInterrupted, "loopd stopped during the run"
			changed = true
		}
		if l != nil && l.Outcome == wire.JobInterrupted {
			// Stopped mid-run (killed, or cancelled at a clean stop):
			// its log's open turn is closed; closing is idempotent.
			if s.Interrupted != nil {
				if err := s.Interrupted(l.Session); err != nil {
					s.Log.Error("an interrupted run's log was not closed", "session", l.Session, "err", err.Error())
				}
			}
		}
	}
	if changed {
		if _, err := writeState(s.State, st); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.st, s.logged = st, map[string]string{}
	s.mu.Unlock()
	return nil
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Loop ticks until ctx ends, at each poll and when a job falls due.
func (s *Scheduler) Loop(ctx context.Context) {
	poll := s.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	for {
		next := s.Tick(ctx, s.now())
		wait := poll
		if !next.IsZero() {
			// The clock may be the owner's test clock, so a due time
			// only shortens the wait, never below a millisecond.
			wait = min(poll, max(time.Millisecond, time.Until(next)))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Tick reads the jobs directory and runs, one after another, every job
// due at now: once each, however many of its times were missed. It
// returns the earliest time a job falls due next (zero if none).
func (s *Scheduler) Tick(ctx context.Context, now time.Time) time.Time {
	jobs, refused := Load(s.Dir, s.Owners, s.Limits)
	jobs = append(slices.Clip(s.Builtin), jobs...)
	type dueRun struct {
		job  Job
		slot time.Time
	}
	var due []dueRun
	s.mu.Lock()
	if s.started.IsZero() {
		s.started = now
	}
	s.jobs, s.refused = jobs, refused
	s.logRefusals(refused)
	s.forgetDeleted(jobs, refused)
	for _, j := range jobs {
		js := s.st.job(j.Name)
		if js == nil {
			// First sight: only times from now on count, so a new file
			// does not run for times before it was written.
			s.st.Jobs = append(s.st.Jobs, jobState{Name: j.Name, From: stamp(now)})
			continue
		}
		if slot, ok := j.Schedule.Next(js.from()); ok && !slot.After(now) {
			due = append(due, dueRun{j, slot})
		}
	}
	s.save()
	s.mu.Unlock()
	for _, d := range due {
		if ctx.Err() != nil {
			break
		}
		j := d.job
		run, ok := s.begin(j, d.slot)
		if !ok {
			continue
		}
		s.Log.Info("job run started", "job", j.Name, "run", run.Run, "session", run.Session, "catchup", run.Catchup)
		s.Run(ctx, j, run)
		end := s.now()
		run.Ended = stamp(end)
		switch {
		case run.Outcome != wire.JobRunning:
		case ctx.Err() != nil:
			run.Outcome, run.Reason = wire.JobInterrupted, "loopd stopped during the run"
		default:
			run.Outcome, run.Reason = wire.JobFailed, "the run ended without an outcome"
		}
		s.Log.Info("job run ended", "job", j.Name, "run", run.Run, "outcome", string(run.Outcome), "reason", run.Reason, "denied", len(run.Denied))
		fitRun(run)
		s.mu.Lock()
		if js := s.st.job(j.Name); js != nil && js.Runs == run.Run {
			js.Last = run
			// Times that passed while the run ran are not run again:
			// a job never follows itself back to back.
			js.From = stamp(end)
		}
		if j.Deliver.Kind != "log" {
			s.report(j, run)
		}
		s.save()
		s.mu.Unlock()
	}
	return s.nextDue()
}

// begin records run n+1 of j as under way, durably, just before it
// starts (so a stop between two due runs leaves the second not begun,
// to run at the next start), and returns a copy for the run to fill.
// The run stands for slot and every earlier time missed; it is a
// catch-up when slot fell before this loopd's first tick.
func (s *Scheduler) begin(j Job, slot time.Time) (*wire.JobRun, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	js := s.st.job(j.Name)
	if js == nil {
		return nil, false
	}
	now := s.now()
	js.Runs++
	for i := 0; s.Exists != nil && s.Exists(SessionID(j.Name, js.Runs)) && i < 1<<16; i++ {
		js.Runs++
	}
	js.From = stamp(now)
	js.Last = &wire.JobRun{Run: js.Runs, Session: SessionID(j.Name, js.Runs), Started: stamp(now),
		Outcome: wire.JobRunning, Catchup: slot.Before(s.started), SHA256: j.SHA256}
	s.save()
	run := *js.Last
	return &run, true
}

// nextDue is the earliest next time of any valid job.
func (s *Scheduler) nextDue() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for _, j := range s.jobs {
		js := s.st.job(j.Name)
		if js == nil {
			continue
		}
		if t, ok := j.Schedule.Next(js.from()); ok && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// logRefusals logs each refused file once per distinct refusal. s.mu is
// held.
func (s *Scheduler) logRefusals(refused []Refused) {
	seen := map[string]bool{}
	for _, r := range refused {
		seen[r.File] = true
		if s.logged[r.File] != r.Err.Error() {
			s.logged[r.File] = r.Err.Error()
			s.Log.Error("job refused", "file", r.File, "err", r.Err.Error())
		}
	}
	for f := range s.logged {
		if !seen[f] {
			delete(s.logged, f)
		}
	}
}

// forgetDeleted drops the record of a job whose file is gone, so it
// never runs again (a file of that name written later is a new job). A
// refused file keeps its record: fixing it resumes the job. s.mu is
// held.
func (s *Scheduler) forgetDeleted(jobs []Job, refused []Refused) {
	s.st.Jobs = slices.DeleteFunc(s.st.Jobs, func(js jobState) bool {
		if slices.ContainsFunc(jobs, func(j Job) bool { return j.Name == js.Name }) {
			return false
		}
		return !slices.ContainsFunc(refused, func(r Refused) bool { return fileName(r.File) == js.Name })
	})
}

// save writes the record; a failure is logged loudly and retried at the
// next tick (the record in memory is still the truth). s.mu is held.
func (s *Scheduler) save() {
	if b, err := strict.Marshal(s.st); err == nil && string(b) == string(s.written) {
		return // unchanged: no write, no fsync, at every poll
	}
	b, err := writeState(s.State, s.st)
	if err != nil {
		s.Log.Error("job record not written", "path", s.State, "err", err.Error())
		return
	}
	s.written = b
}

// List is what bxctl jobs shows: every job file as read at the last
// tick, with its next and last runs.
func (s *Scheduler) List() *wire.JobList {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &wire.JobList{Jobs: []wire.JobInfo{}, Refused: []wire.JobRefusal{}}
	for _, j := range s.jobs {
		info := wire.JobInfo{Name: j.Name, Schedule: j.Schedule.String(), Deliver: j.Deliver.String()}
		if js := s.st.job(j.Name); js != nil {
			info.Runs = js.Runs
			if t, ok := j.Schedule.Next(js.from()); ok {
				info.Next = stamp(t)
			}
			if js.Last != nil {
				l := *js.Last
				l.Text, _ = truncate.Bytes(l.Text, wire.MaxJobListText)
				l.Reason, _ = truncate.Bytes(l.Reason, wire.MaxJobListText)
				l.Denied = nil
				for _, d := range js.Last.Denied[:min(len(js.Last.Denied), wire.MaxJobListCalls)] {
					d = cutKeepingEnd(d, wire.MaxJobListCall)
					l.Denied = append(l.Denied, d)
				}
				info.Last = &l
			}
		}
		out.Jobs = append(out.Jobs, info)
	}
	for _, r := range s.refused {
		msg := cutKeepingEnd(r.Err.Error(), 2*wire.MaxJobListCall)
		out.Refused = append(out.Refused, wire.JobRefusal{File: r.File, Error: msg})
	}
	fitList(out)
	return out
}

// fitList drops, while the list would be over loop.sock's frame, first
// the runs' answers, then their refused calls, then their reasons (JSON
// escaping can make text six times longer); bxctl jobs then shows less,
// and the session logs keep everything.
func fitList(l *wire.JobList) {
	limit := wire.LoopFrameMax - 1024
	for step := 0; encodedLen(l) > limit && step < 3; step++ {
		for i := range l.Jobs {
			if r := l.Jobs[i].Last; r != nil {
				switch step {
				case 0:
					r.Text = ""
				case 1:
					r.Denied = nil
				case 2:
					r.Reason = ""
				}
			}
		}
	}
}

// maxRecord caps one run or report, encoded, in loopd's record, so the
// record (wire.MaxJobs runs and wire.MaxJobReports reports) stays well
// under MaxState and always reads back.
const maxRecord = 24 << 10

// fitRun caps what a run's record keeps: the reason and each refused
// call by length, then the answer until the run, encoded, is within
// maxRecord (the session log keeps everything).
func fitRun(r *wire.JobRun) {
	r.Reason = cutKeepingEnd(r.Reason, 1<<10)
	for i, d := range r.Denied {
		r.Denied[i] = cutKeepingEnd(d, 2*wire.MaxJobListCall)
	}
	for encodedLen(r) > maxRecord && r.Text != "" {
		r.Text, _ = truncate.Bytes(r.Text, len(r.Text)/2)
	}
}

// maxReportCalls caps the refused calls a report carries.
const maxReportCalls = 8

func encodedLen(v any) int {
	b, err := strict.Marshal(v)
	if err != nil {
		return 1 << 30
	}
	return len(b)
}

// fitReport cuts r's text until r, encoded, is within a page of
// reports: text that JSON escapes heavily (control characters) can be
// six times its length.
func fitReport(r *wire.JobReport) {
	for encodedLen(r) > maxRecord && r.Text != "" {
		r.Text, _ = truncate.Bytes(r.Text, len(r.Text)/2)
	}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// cutKeepingEnd cuts s to at most n bytes by dropping its middle, so
// that a refusal's runbook pointer, at its end, is never cut off.
func cutKeepingEnd(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " … "
	tail := n / 3
	head, _ := truncate.Bytes(s, n-tail-len(mark))
	end := s[len(s)-tail:]
	for len(end) > 0 && !utf8.RuneStart(end[0]) {
		end = end[1:]
	}
	return head + mark + end
}

// report queues run's report for gatewayd, keeping the last
// wire.MaxJobReports. s.mu is held.
func (s *Scheduler) report(j Job, run *wire.JobRun) {
	s.st.Seq++
	r := wire.JobReport{Seq: s.st.Seq, Job: j.Name, Run: run.Run, Session: run.Session,
		Deliver: j.Deliver.String(), Outcome: run.Outcome, Text: run.Text, Reason: cutKeepingEnd(run.Reason, 1<<10)}
	for _, d := range run.Denied[:min(len(run.Denied), maxReportCalls)] {
		r.Denied = append(r.Denied, cutKeepingEnd(d, 2*wire.MaxJobListCall))
	}
	fitReport(&r)
	s.st.Reports = append(s.st.Reports, r)
	if n := len(s.st.Reports); n > wire.MaxJobReports {
		s.st.Reports = slices.Delete(s.st.Reports, 0, n-wire.MaxJobReports)
	}
}

// Reports answers gatewayd's job_reports_since: the kept reports after
// after, oldest first, within wire.MaxJobReportsBytes.
func (s *Scheduler) Reports(after int64) *wire.JobReports {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &wire.JobReports{Items: []wire.JobReport{}}
	size := 0
	for _, r := range s.st.Reports {
		if r.Seq <= after {
			continue
		}
		n := encodedLen(r)
		if size+n > wire.MaxJobReportsBytes && len(out.Items) > 0 {
			out.More = true
			break
		}
		size += n
		out.Items = append(out.Items, r)
	}
	return out
}
