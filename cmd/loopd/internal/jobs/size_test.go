package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestListFitsAFrame: bxctl jobs' answer for the most job files loopd
// reads, each with every field at its cap (a long schedule, a last run
// with a long answer, reason and refused calls), fits one loop.sock
// frame; so do reports at their cap.
func TestListFitsAFrame(t *testing.T) {
	dir, state := dirs(t)
	c := &clock{}
	c.set("2026-12-01T09:59:00Z")
	long := strings.Repeat("é\x01\"", 8000) // JSON escapes \x01 as six bytes
	cron := "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39 * * * *"
	for i := range MaxFiles {
		name := fmt.Sprintf("job-%027d", i)
		writeJob(t, dir, name, fmt.Sprintf("name = %q\ncron = %q\nprompt = \"p\"\ndeliver = \"dm:8fz3uyc1d7bqxmh5m1ffn3jtbe\"\n", name, cron))
	}
	s := &Scheduler{Dir: dir, State: state, Owners: ownership.Self(), Now: c.now, Log: slog.New(slog.DiscardHandler),
		Run: func(_ context.Context, j Job, r *wire.JobRun) {
			r.Outcome, r.Text, r.Reason = wire.JobStopped, cut(long), cut(long)
			for range MaxDenied {
				r.Denied = append(r.Denied, cut(long))
			}
		}}
	require.NoError(t, s.Start())
	s.Tick(context.Background(), c.now())
	c.set("2026-12-01T10:00:00Z")
	s.Tick(context.Background(), c.now())
	// And a refusal for a file over the count, with a long path.
	require.NoError(t, os.WriteFile(filepath.Join(dir, strings.Repeat("z", 200)+".toml"), []byte("x"), 0o600))
	l := s.List()
	require.Len(t, l.Jobs, MaxFiles)
	b, err := wire.LoopEvents.Encode(l)
	require.NoError(t, err)
	require.Less(t, len(b), wire.LoopFrameMax, "a full job list is over loop.sock's frame cap")
	rs, err := wire.LoopEvents.Encode(s.Reports(0))
	require.NoError(t, err)
	require.Less(t, len(rs), wire.LoopFrameMax, "a page of reports is over loop.sock's frame cap")
	// The record stays readable: a new scheduler starts from it.
	fi, err := os.Stat(state)
	require.NoError(t, err)
	require.Less(t, fi.Size(), int64(MaxState)/2)
	again := &Scheduler{Dir: dir, State: state, Owners: ownership.Self(), Now: c.now, Log: slog.New(slog.DiscardHandler)}
	require.NoError(t, again.Start())
	t.Logf("full list %d bytes, a page of reports %d bytes, frame cap %d, record %d bytes", len(b), len(rs), wire.LoopFrameMax, fi.Size())
}

// BenchmarkTick is one poll with wire.MaxJobs job files and nothing
// due: the directory read, each file's ownership walk and parse, and no
// write (the record is unchanged).
func BenchmarkTick(b *testing.B) {
	root := b.TempDir()
	dir := filepath.Join(root, "jobs")
	require.NoError(b, os.Mkdir(dir, 0o700))
	for i := range MaxFiles {
		name := fmt.Sprintf("job-%d", i)
		require.NoError(b, os.WriteFile(filepath.Join(dir, name+".toml"), []byte(hourly(name, "p")), 0o600))
	}
	c := &clock{}
	c.set("2026-12-01T09:30:00Z")
	s := &Scheduler{Dir: dir, State: filepath.Join(root, "jobs.json"), Owners: ownership.Self(), Now: c.now, Log: slog.New(slog.DiscardHandler),
		Run: func(context.Context, Job, *wire.JobRun) {}}
	require.NoError(b, s.Start())
	s.Tick(context.Background(), c.now())
	b.ResetTimer()
	for range b.N {
		s.Tick(context.Background(), c.now())
	}
}
