package jobs

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd/schedule"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// clock is the tests' controllable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time             { return c.t }
func (c *clock) advance(d time.Duration)    { c.t = c.t.Add(d) }
func (c *clock) set(s string) (t time.Time) { c.t, _ = time.Parse(time.RFC3339, s); return c.t }

// ran records each run the scheduler starts.
type ran struct {
	job, prompt, session string
	catchup              bool
}

func newScheduler(t *testing.T, dir, state string, c *clock, runs *[]ran) *Scheduler {
	t.Helper()
	s := &Scheduler{Dir: dir, State: state, Owners: ownership.Self(), Now: c.now, Log: slog.New(slog.DiscardHandler),
		Run: func(_ context.Context, j Job, r *wire.JobRun) {
			*runs = append(*runs, ran{j.Name, j.Prompt, r.Session, r.Catchup})
			r.Outcome, r.Text = wire.JobAnswered, "done: "+j.Prompt
		}}
	require.NoError(t, s.Start())
	return s
}

func writeJob(t *testing.T, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".toml"), []byte(body), 0o600))
}

func hourly(name, prompt string) string {
	return "name = \"" + name + "\"\ncron = \"0 * * * *\"\nprompt = \"" + prompt + "\"\ndeliver = \"log\"\n"
}

func dirs(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "jobs"), 0o700))
	return filepath.Join(root, "jobs"), filepath.Join(root, "jobs.json")
}

// TestSchedulerEditDeleteInvalid: a job first seen does not run for
// times before it; it runs at its time; an edit applies to the next run;
// an invalid file beside it is refused alone and listed with its
// reason; a deleted file never runs again.
func TestSchedulerEditDeleteInvalid(t *testing.T) {
	dir, state := dirs(t)
	c := &clock{}
	c.set("2026-12-01T09:30:00Z")
	var runs []ran
	s := newScheduler(t, dir, state, c, &runs)
	writeJob(t, dir, "brief", hourly("brief", "first prompt"))
	writeJob(t, dir, "broken", "name = \"broken\"\ncron = \"61 * * * *\"\nprompt = \"x\"\ndeliver = \"log\"\n")
	ctx := context.Background()
	s.Tick(ctx, c.now())
	require.Empty(t, runs, "a job ran for a time before loopd first saw it")
	l := s.List()
	require.Len(t, l.Jobs, 1)
	require.Equal(t, "2026-12-01T10:00:00Z", l.Jobs[0].Next)
	require.Len(t, l.Refused, 1)
	if r := l.Refused[0]; !strings.HasSuffix(r.File, "broken.toml") || !strings.Contains(r.Error, "minute") || !strings.HasSuffix(r.Error, "see docs/runbook.md#job-invalid") {
		t.Errorf("refusal = %+v", r)
	}

	c.set("2026-12-01T10:00:00Z")
	s.Tick(ctx, c.now())
	require.Equal(t, []ran{{"brief", "first prompt", "job-brief-1", false}}, runs)

	writeJob(t, dir, "brief", hourly("brief", "edited prompt"))
	c.advance(30 * time.Minute)
	s.Tick(ctx, c.now())
	require.Len(t, runs, 1, "ran between its times")
	c.advance(30 * time.Minute)
	s.Tick(ctx, c.now())
	require.Len(t, runs, 2)
	require.Equal(t, "edited prompt", runs[1].prompt, "the edit did not apply to the next run")
	require.Equal(t, "job-brief-2", runs[1].session, "each run is a session of its own")
	if last := s.List().Jobs[0].Last; last.Outcome != wire.JobAnswered || last.Text != "done: edited prompt" || last.Ended == "" {
		t.Errorf("last run = %+v", last)
	}

	require.NoError(t, os.Remove(filepath.Join(dir, "brief.toml")))
	for range 5 {
		c.advance(time.Hour)
		s.Tick(ctx, c.now())
	}
	require.Len(t, runs, 2, "a deleted job ran again")
	require.Empty(t, s.List().Jobs)
	// The same name written again is a new job: it starts counting now.
	writeJob(t, dir, "brief", hourly("brief", "again"))
	s.Tick(ctx, c.now())
	require.Len(t, runs, 2)
}

// TestSchedulerCatchUpOnce: a loopd stopped over ten of a job's times
// runs it once when it starts again, marked as a catch-up, then keeps
// to the schedule; a run a stopped loopd left under way is shown as
// interrupted.
func TestSchedulerCatchUpOnce(t *testing.T) {
	dir, state := dirs(t)
	c := &clock{}
	c.set("2026-12-01T09:59:00Z")
	var runs []ran
	writeJob(t, dir, "brief", hourly("brief", "p"))
	s := newScheduler(t, dir, state, c, &runs)
	ctx := context.Background()
	s.Tick(ctx, c.now())
	c.set("2026-12-01T10:00:00Z")
	s.Tick(ctx, c.now())
	require.Len(t, runs, 1)

	// loopd is down from 10:00 to 20:30: ten times are missed.
	c.set("2026-12-01T20:30:00Z")
	s = newScheduler(t, dir, state, c, &runs)
	s.Tick(ctx, c.now())
	s.Tick(ctx, c.now())
	require.Len(t, runs, 2, "missed times ran more than once, or not at all")
	require.True(t, runs[1].catchup, "the catch-up run is not marked")
	c.set("2026-12-01T21:00:00Z")
	s.Tick(ctx, c.now())
	require.Len(t, runs, 3)
	require.False(t, runs[2].catchup)

	// A run under way when loopd stops is interrupted, not run again
	// for the same time.
	block := make(chan struct{})
	s.Run = func(ctx context.Context, j Job, r *wire.JobRun) { close(block); <-ctx.Done() }
	rctx, cancel := context.WithCancel(ctx)
	c.set("2026-12-01T22:00:00Z")
	done := make(chan struct{})
	go func() { s.Tick(rctx, c.now()); close(done) }()
	<-block
	cancel()
	<-done
	s = newScheduler(t, dir, state, c, &runs)
	s.Tick(ctx, c.now())
	if last := s.List().Jobs[0].Last; last.Run != 4 || last.Outcome != wire.JobInterrupted {
		t.Errorf("after a stop mid-run, last = %+v; want run 4 interrupted", last)
	}
	require.Len(t, runs, 3, "the interrupted time was run again")
}

// TestSchedulerUnsafeFile: a job file another user could have written
// (here: writable by everyone) is refused by the owner-file rule, alone.
func TestSchedulerUnsafeFile(t *testing.T) {
	dir, state := dirs(t)
	c := &clock{}
	c.set("2026-12-01T09:59:00Z")
	var runs []ran
	writeJob(t, dir, "ok", hourly("ok", "p"))
	writeJob(t, dir, "wide", hourly("wide", "p"))
	require.NoError(t, os.Chmod(filepath.Join(dir, "wide.toml"), 0o666))
	s := newScheduler(t, dir, state, c, &runs)
	s.Tick(context.Background(), c.now())
	c.set("2026-12-01T10:00:00Z")
	s.Tick(context.Background(), c.now())
	require.Equal(t, []ran{{"ok", "p", "job-ok-1", false}}, runs)
	l := s.List()
	require.Len(t, l.Refused, 1)
	require.Contains(t, l.Refused[0].Error, "see docs/runbook.md#owner-file-unsafe")
}

func TestParseRefusals(t *testing.T) {
	lim := Limits{MaxCalls: 12, ToolResultCap: 16384}
	good := "name = \"a\"\nevery = \"1h\"\nprompt = \"p\"\ndeliver = \"log\"\n"
	if _, err := Parse("/j/a.toml", []byte(good), lim); err != nil {
		t.Fatalf("Parse(good) = %v", err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"unknown key", good + "shell = \"x\"\n", "shell"},
		{"name differs", strings.Replace(good, `"a"`, `"b"`, 1), "match the file"},
		{"two schedules", good + "at = \"2027-01-01T00:00:00Z\"\n", "exactly one"},
		{"no schedule", strings.Replace(good, "every = \"1h\"\n", "", 1), "exactly one"},
		{"no prompt", strings.Replace(good, "prompt = \"p\"\n", "", 1), "prompt"},
		{"no deliver", strings.Replace(good, "deliver = \"log\"\n", "", 1), "deliver"},
		{"bad deliver", strings.Replace(good, `"log"`, `"channel:town-square"`, 1), "deliver"},
		{"caps over loopd's", good + "[caps]\nmax_calls = 13\n", "only tighten"},
		{"float", good + "[caps]\nmax_calls = 1.5\n", "max_calls"},
		{"case", strings.Replace(good, "prompt", "Prompt", 1), "Prompt"},
	} {
		if _, err := Parse("/j/a.toml", []byte(tc.body), lim); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Parse = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	if d, err := ParseDeliver("dm:8fz3uyc1d7bqxmh5m1ffn3jtbe"); err != nil || d.Kind != "dm" {
		t.Errorf("ParseDeliver(dm) = %v, %v", d, err)
	}
}

// FuzzParse: no job file makes the parser panic, and one it accepts has
// a valid name, a schedule and a prompt within their caps.
func FuzzParse(f *testing.F) {
	f.Add([]byte("name = \"a\"\ncron = \"0 7 * * 1-5\"\nprompt = \"p\"\ndeliver = \"dm:8fz3uyc1d7bqxmh5m1ffn3jtbe\"\n[caps]\nmax_calls = 3\n"))
	f.Add([]byte("name = \"a\"\nat = \"2027-01-01T00:00:00Z\"\nprompt = \"\"\"x\"\"\"\ndeliver = \"log\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := Parse("/j/a.toml", data, Limits{MaxCalls: 12, ToolResultCap: 16384})
		if err != nil {
			return
		}
		if j.Name != "a" || j.Prompt == "" || len(j.Prompt) > MaxPrompt || j.Schedule == (schedule.Schedule{}) || j.Deliver.Kind == "" {
			t.Fatalf("Parse accepted %+v", j)
		}
	})
}

// TestSchedulerNeverReusesASession: after the record is lost, run
// numbers skip past the sessions already on disk.
func TestSchedulerNeverReusesASession(t *testing.T) {
	dir, state := dirs(t)
	c := &clock{}
	c.set("2026-12-01T09:59:00Z")
	var runs []ran
	writeJob(t, dir, "brief", hourly("brief", "p"))
	s := newScheduler(t, dir, state, c, &runs)
	s.Exists = func(id string) bool { return id == "job-brief-1" || id == "job-brief-2" }
	s.Tick(context.Background(), c.now())
	c.set("2026-12-01T10:00:00Z")
	s.Tick(context.Background(), c.now())
	require.Equal(t, "job-brief-3", runs[0].session)
}

// TestSchedulerReports: a run whose deliver is Mattermost leaves a
// report for gatewayd, numbered, after the cursor it names; a log-only
// job leaves none; only the last wire.MaxJobReports are kept.
func TestSchedulerReports(t *testing.T) {
	dir, state := dirs(t)
	c := &clock{}
	c.set("2026-12-01T09:59:00Z")
	var runs []ran
	writeJob(t, dir, "brief", strings.Replace(hourly("brief", "p"), `"log"`, `"dm:8fz3uyc1d7bqxmh5m1ffn3jtbe"`, 1))
	writeJob(t, dir, "quiet", hourly("quiet", "q"))
	s := newScheduler(t, dir, state, c, &runs)
	ctx := context.Background()
	s.Tick(ctx, c.now())
	for range wire.MaxJobReports + 3 {
		c.advance(time.Hour)
		s.Tick(ctx, c.now())
	}
	all := s.Reports(0)
	require.Len(t, all.Items, wire.MaxJobReports)
	first := all.Items[0]
	require.Equal(t, int64(4), first.Seq, "the oldest reports were not dropped")
	require.Equal(t, "dm:8fz3uyc1d7bqxmh5m1ffn3jtbe", first.Deliver)
	require.Equal(t, "done: p", first.Text)
	require.Len(t, s.Reports(int64(wire.MaxJobReports+2)).Items, 1)
	// The record survives a restart.
	s = newScheduler(t, dir, state, c, &runs)
	require.Len(t, s.Reports(0).Items, wire.MaxJobReports)
}

// TestBuiltinNameReserved: a job file may not take the tiering job's
// name, and the built-in job is listed and run like a file's.
func TestBuiltinNameReserved(t *testing.T) {
	dir, state := dirs(t)
	c := &clock{}
	c.set("2026-12-01T09:59:00Z")
	var runs []ran
	writeJob(t, dir, TieringName, hourly(TieringName, "p"))
	s := newScheduler(t, dir, state, c, &runs)
	sched, err := schedule.ParseCron("0 * * * *")
	require.NoError(t, err)
	s.Builtin = []Job{Tiering(sched, func(context.Context, string) (*wire.TieringStats, error) { return &wire.TieringStats{}, nil })}
	s.Tick(context.Background(), c.now())
	l := s.List()
	require.Len(t, l.Refused, 1)
	require.Contains(t, l.Refused[0].Error, "built-in tiering job's")
	require.Len(t, l.Jobs, 1)
	c.set("2026-12-01T10:00:00Z")
	s.Tick(context.Background(), c.now())
	require.Equal(t, []ran{{TieringName, "", "job-memory-tiering-1", false}}, runs)
}

func TestTieringPrompt(t *testing.T) {
	p := TieringPrompt(&wire.TieringStats{Files: []wire.TierFile{
		{File: "memory.md", Entries: []wire.TierEntry{{Text: "a\nb", Hits: 3, LastFound: "2026-11-30T00:00:00Z"}, {Text: "c"}}},
		{File: "user.md", Entries: []wire.TierEntry{}}}})
	for _, want := range []string{`memory.md (file "memory", 2 entries):`, "1. [found 3 times, last 2026-11-30T00:00:00Z] a\\nb", "2. [found 0 times, last never] c", "user.md (file \"user\", 0 entries):\n(empty"} {
		if !strings.Contains(p, want) {
			t.Errorf("TieringPrompt lacks %q:\n%s", want, p)
		}
	}
}

// TestDeployExample: deploy/jobs/example.toml is a valid job file.
func TestDeployExample(t *testing.T) {
	data, err := os.ReadFile("../../../../deploy/jobs/example.toml")
	require.NoError(t, err)
	j, err := Parse("/state/jobs/example.toml", data, Limits{MaxCalls: 12, ToolResultCap: 16384})
	require.NoError(t, err)
	require.Equal(t, "cron 0 7 * * 1-5", j.Schedule.String())
}

// TestSchedulerStopBetweenRuns: two jobs due in one tick run one after
// the other; a stop during the first leaves the second not begun, and
// it runs (as a catch-up) at the next start.
func TestSchedulerStopBetweenRuns(t *testing.T) {
	dir, state := dirs(t)
	c := &clock{}
	c.set("2026-12-01T09:59:00Z")
	var runs []ran
	writeJob(t, dir, "a", hourly("a", "p"))
	writeJob(t, dir, "b", hourly("b", "q"))
	s := newScheduler(t, dir, state, c, &runs)
	s.Tick(context.Background(), c.now())
	ctx, cancel := context.WithCancel(context.Background())
	s.Run = func(ctx context.Context, j Job, r *wire.JobRun) {
		runs = append(runs, ran{j.Name, j.Prompt, r.Session, r.Catchup})
		cancel()
	}
	c.set("2026-12-01T10:00:00Z")
	s.Tick(ctx, c.now())
	require.Len(t, runs, 1)
	c.set("2026-12-01T10:05:00Z")
	s = newScheduler(t, dir, state, c, &runs)
	s.Tick(context.Background(), c.now())
	require.Len(t, runs, 2)
	require.Equal(t, ran{"b", "q", "job-b-1", true}, runs[1])
	for _, j := range s.List().Jobs {
		if j.Name == "a" && (j.Last == nil || j.Last.Outcome != wire.JobInterrupted) {
			t.Errorf("a's last run = %+v, want interrupted", j.Last)
		}
	}
}
