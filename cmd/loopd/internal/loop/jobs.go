package loop

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/jobs"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/memory"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
)

// JobsConfig is loopd.toml's [jobs]: whose job files loopd believes and
// how often it reads the directory again.
type JobsConfig struct {
	// OwnerUID is the owner's uid: job files, and every directory above
	// them, must be owned by root or this uid and writable by no one
	// else. Absent: loopd's own uid (the owner runs loopd, as under
	// bxctl up without root). Set it when loopd has a uid of its own, so
	// that a job file loopd's uid could have written is refused.
	OwnerUID *uint32 `toml:"owner_uid"`
	// PollMS is how often the jobs directory is read again (default
	// 15000): an edit or a new file is seen within it.
	PollMS int64 `toml:"poll_ms"`
	// ClockFile is unstable and for tests only: when set, the scheduler
	// reads the current time (RFC 3339) from this file instead of the
	// system clock, so a test moves time without waiting for it.
	ClockFile string `toml:"clock_file"`
	// Tiering is when the built-in memory tiering job runs, a cron line
	// (default jobs.DefaultTiering, Sundays 04:00 UTC), or "off". It runs
	// only with memoryd (memory_socket set).
	Tiering string `toml:"tiering"`
}

func (c JobsConfig) owners() ownership.Owners {
	if c.OwnerUID != nil {
		return ownership.Trust(*c.OwnerUID)
	}
	return ownership.Self()
}

func (c JobsConfig) check(path string) error {
	switch {
	case c.PollMS < 0 || c.PollMS > 3600_000:
		return fmt.Errorf("config %s: jobs.poll_ms must be 0 (the default) to 3600000", path)
	case c.PollMS > 0 && c.PollMS < 10:
		return fmt.Errorf("config %s: jobs.poll_ms must be at least 10", path)
	case c.ClockFile != "" && !filepath.IsAbs(c.ClockFile):
		return fmt.Errorf("config %s: jobs.clock_file must be an absolute path, got %q", path, c.ClockFile)
	}
	if _, err := c.tiering(); err != nil {
		return fmt.Errorf("config %s: jobs.tiering: %v", path, err)
	}
	return nil
}

// tiering is the tiering job's schedule; ok is false when it is off.
func (c JobsConfig) tiering() (jobs.Schedule, error) {
	switch c.Tiering {
	case "off":
		return jobs.Schedule{}, nil
	case "":
		return jobs.ParseCron(jobs.DefaultTiering)
	}
	return jobs.ParseCron(c.Tiering)
}

// scheduler builds the job scheduler over the background slot's engine:
// each run is a session of its own with a fresh baseline.
func (c Config) scheduler(log *slog.Logger, bg *turn.Engine, baseline func(string) (session.Baseline, error), mem *memory.Client) *jobs.Scheduler {
	r := &jobs.Runner{State: c.StateDir, Engine: bg, Baseline: baseline}
	s := &jobs.Scheduler{
		Dir: layout.Jobs.In(c.StateDir), State: filepath.Join(layout.LoopState.In(c.StateDir), "jobs.json"),
		Owners: c.Jobs.owners(), Limits: jobs.Limits{MaxCalls: cmp.Or(bg.Limits.MaxCalls, turn.DefaultLimits.MaxCalls), ToolResultCap: cmp.Or(bg.Limits.ResultCap, turn.DefaultLimits.ResultCap)},
		Run: r.Run, Log: log.With("part", "jobs"), Poll: ms(c.Jobs.PollMS),
		Interrupted: r.CloseInterrupted,
		Exists:      func(id string) bool { _, err := os.Lstat(session.Dir(c.StateDir, id)); return err == nil },
	}
	if t, _ := c.Jobs.tiering(); mem != nil && c.Jobs.Tiering != "off" {
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
