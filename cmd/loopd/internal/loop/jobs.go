package loop

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/jobs"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/memory"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
)

// scheduler builds the job scheduler over the background slot's engine:
// each run is a session of its own with a fresh baseline.
func scheduler(c loopd.Config, log *slog.Logger, bg *turn.Engine, baseline func(string) (sessionlog.Baseline, error), mem *memory.Client) *jobs.Scheduler {
	r := &jobs.Runner{State: c.StateDir, Engine: bg, Baseline: baseline}
	s := &jobs.Scheduler{
		Dir: layout.Jobs.In(c.StateDir), State: layout.LoopJobs(c.StateDir),
		Owners: c.Jobs.Owners(), Limits: jobs.Limits{MaxCalls: cmp.Or(bg.Limits.MaxCalls, turn.DefaultLimits.MaxCalls), ToolResultCap: cmp.Or(bg.Limits.ResultCap, turn.DefaultLimits.ResultCap)},
		Run: r.Run, Log: log.With("part", "jobs"), Poll: ms(c.Jobs.PollMS),
		Interrupted: r.CloseInterrupted,
		Exists:      func(id string) bool { _, err := os.Lstat(session.Dir(c.StateDir, id)); return err == nil },
	}
	if t, on, _ := c.Jobs.TieringSchedule(); mem != nil && on {
		s.Builtin = append(s.Builtin, jobs.Tiering(t, mem.Tiering))
	}
	if c.Jobs.ClockFile != "" {
		s.Now = fileClock(c.Jobs.ClockFile, log)
	}
	return s
}

// fileClock reads the time from path at each call; while the file does
// not hold one, the last time read stands (the zero time before any).
func fileClock(path string, log *slog.Logger) func() time.Time {
	var mu sync.Mutex
	var last time.Time
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		b, err := os.ReadFile(path)
		if err == nil {
			var t time.Time
			if t, err = time.Parse(time.RFC3339, strings.TrimSpace(string(b))); err == nil {
				last = t
			}
		}
		if err != nil {
			log.Warn("jobs.clock_file unreadable; the last time read stands", "path", path, "err", err.Error())
		}
		return last
	}
}

// runJobs starts the scheduler's loop; it stops with ctx.
func runJobs(ctx context.Context, s *jobs.Scheduler, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() { defer wg.Done(); s.Loop(ctx) }()
}
