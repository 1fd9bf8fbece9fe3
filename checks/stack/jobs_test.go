package stack

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/first"
)

// jobStack is a stack whose loopd reads the time from a file the test
// writes (loopd.toml's [jobs] clock_file), so the test moves the
// scheduler's clock instead of waiting for it, and whose brokerd lets an
// approval wait ttl.
type jobStack struct {
	t          *testing.T
	bin, state string
	clock      string
	srv        *fake.Server
	host       string
}

func newJobStack(t *testing.T, ttl time.Duration, jobsConfig string) *jobStack {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	// gatewayd too: bxctl up starts it only when its config exists.
	js := &jobStack{t: t, bin: Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd", "gatewayd"), state: ShortState(t)}
	js.srv = fake.New(t, fake.Options{Slots: 2, NCtx: 65536})
	selftestReplies(js.srv)
	preconfigure(t, js.state, js.srv)
	u, _ := url.Parse(js.srv.URL())
	js.host = u.Host
	js.clock = filepath.Join(filepath.Dir(js.state), "clock")
	p := first.Params{State: js.state, Llama: js.host, Model: "fake-model"}
	for _, c := range first.Configs {
		switch c.Role {
		case "loopd":
			text := c.Text(p) + fmt.Sprintf("\n[jobs]\nclock_file = %q\npoll_ms = 20\n", js.clock) + jobsConfig
			require.NoError(t, os.WriteFile(c.Path(js.state), []byte(text), 0o600))
		case "brokerd":
			text := fmt.Sprintf("approval_ttl_ms = %d\n", ttl.Milliseconds()) + c.Text(p)
			require.NoError(t, os.WriteFile(c.Path(js.state), []byte(text), 0o600))
		}
	}
	require.NoError(t, os.MkdirAll(layout.Jobs.In(js.state), 0o700))
	require.NoError(t, os.MkdirAll(layout.Grants.In(js.state), 0o700))
	return js
}

// at sets the scheduler's clock.
func (js *jobStack) at(stamp string) {
	js.t.Helper()
	tmp := js.clock + ".tmp"
	require.NoError(js.t, os.WriteFile(tmp, []byte(stamp+"\n"), 0o644))
	require.NoError(js.t, os.Rename(tmp, js.clock))
}

// owned writes an owner's file (a job or a grant) into dir with the
// table's owner, group and mode, as bxctl up leaves the owner's files:
// with a user per role (as root) the reading role must be its group.
func (js *jobStack) owned(entry *layout.Entry, name, body string) {
	js.t.Helper()
	path := filepath.Join(entry.In(js.state), name)
	tmp := filepath.Join(entry.In(js.state), "."+name+".tmp")
	require.NoError(js.t, os.WriteFile(tmp, []byte(body), 0o600))
	if u, err := layout.LoadUsers(js.state); err == nil && !u.Single() {
		uid, gid := entry.IDs(u)
		require.NoError(js.t, os.Chown(tmp, int(uid), int(gid)))
		require.NoError(js.t, os.Chmod(tmp, entry.FilesFor(u)))
	}
	require.NoError(js.t, os.Rename(tmp, path))
}

func (js *jobStack) up() <-chan error { return Up(js.t, js.bin, js.state, js.host, nil) }

// jobs is `bxctl jobs`.
func (js *jobStack) jobs() string {
	js.t.Helper()
	out, err := bxctl(js.t, js.bin, "jobs", "--state", js.state)
	require.NoError(js.t, err, out)
	return out
}

// until polls bxctl jobs until its output holds every one of want.
func (js *jobStack) until(want ...string) string {
	js.t.Helper()
	for i := 0; ; i++ {
		out := js.jobs()
		all := true
		for _, w := range want {
			all = all && strings.Contains(out, w)
		}
		if all {
			return out
		}
		if i > 1500 {
			log, _ := os.ReadFile(filepath.Join(js.state, "logs", "loopd.log"))
			js.t.Fatalf("bxctl jobs never showed %q:\n%s\nloopd's log:\n%s", want, out, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastJobRequest is the newest request on the background slot.
func (js *jobStack) lastJobRequest() string {
	reqs := js.srv.Requests(1)
	return string(reqs[len(reqs)-1])
}

func job(name, schedule, prompt string) string {
	return fmt.Sprintf("name = %q\n%s\nprompt = %q\ndeliver = \"log\"\n", name, schedule, prompt)
}

func readGrant(mode string) string {
	return fmt.Sprintf("[[grant]]\nid = \"reports\"\ntool = \"read_file\"\npaths = [\"/home/owner/Reports\"]\nmax_taint = \"secret\"\nmode = %q\n", mode)
}

var readReport = fake.ToolCall{Name: "call_tool", Arguments: `{"name":"read_file","arguments":{"path":"/home/owner/Reports/today.txt"}}`}

// TestStackJobs runs the owner's jobs on the real binaries over real
// sockets, the scheduler's clock moved by the test: an invalid job file
// is refused alone; a job runs on the background slot at its time; a
// grant revoked between two runs denies the second run's call and its
// report says so; the edited file's prompt is the one the next run
// sends; an ask in a job is shown naming the job and ends denied when
// it expires; a deleted job never runs again; and the times missed while
// Boxmaker was down run once when it starts again.
func TestStackJobs(t *testing.T) {
	t.Parallel()
	js := newJobStack(t, 1500*time.Millisecond, "")
	js.at("2026-12-01T09:59:00Z")
	js.owned(&layout.Grants, "reports.toml", readGrant("auto"))
	js.owned(&layout.Jobs, "brief.toml", job("brief", `cron = "0 * * * *"`, "first prompt"))
	js.owned(&layout.Jobs, "broken.toml", job("broken", `cron = "0 25 * * *"`, "never"))
	exited := js.up()
	js.until("job brief: cron 0 * * * *, deliver log, next 2026-12-01T10:00:00Z, 0 runs",
		"broken.toml: job", "hour", "see docs/runbook.md#job-invalid")
	before := len(js.srv.Requests(1))

	// Run 1: the grant covers the call, so brokerd lets it through (to
	// a runner without tool containers, which fails it).
	js.srv.Script(fake.Reply{Reasoning: "Read.", ToolCalls: []fake.ToolCall{readReport}}, fake.Reply{Reasoning: "Done.", Content: "Report one."})
	js.at("2026-12-01T10:00:00Z")
	out := js.until("last: run 1 (session job-brief-1)", ": answered", "answer: Report one.")
	require.NotContains(t, out, "refused: read_file", "run 1's call was refused")
	require.Equal(t, before+2, len(js.srv.Requests(1)), "run 1 was not two model calls on the background slot")
	require.Contains(t, js.lastJobRequest(), "first prompt")
	require.Empty(t, js.srv.Requests(0), "a job ran on the main slot")

	// Between the runs: the grant is revoked and the prompt edited.
	require.NoError(t, os.Remove(filepath.Join(layout.Grants.In(js.state), "reports.toml")))
	js.owned(&layout.Jobs, "brief.toml", job("brief", `cron = "0 * * * *"`, "edited prompt"))
	js.srv.Script(fake.Reply{Reasoning: "Read.", ToolCalls: []fake.ToolCall{readReport}}, fake.Reply{Reasoning: "Denied.", Content: "Report two."})
	js.at("2026-12-01T11:00:00Z")
	out = js.until("last: run 2 (session job-brief-2)", "answer: Report two.")
	require.Contains(t, out, "refused: read_file: ", "run 2's report does not say its call was refused")
	require.Contains(t, out, "see docs/runbook.md#no-grant")
	require.Contains(t, js.lastJobRequest(), "edited prompt", "run 2 did not send the edited prompt")
	require.NotContains(t, js.lastJobRequest(), "first prompt", "run 2 carried run 1's conversation")

	// Run 3: an ask grant; nobody answers; the approval names the job
	// while it waits and the call ends denied when it expires.
	js.owned(&layout.Grants, "reports.toml", readGrant("ask"))
	js.srv.Script(fake.Reply{Reasoning: "Read.", ToolCalls: []fake.ToolCall{readReport}}, fake.Reply{Reasoning: "Expired.", Content: "Report three."})
	js.at("2026-12-01T12:00:00Z")
	for i := 0; ; i++ {
		list, err := bxctl(t, js.bin, "approvals", "--state", js.state)
		require.NoError(t, err, list)
		if strings.Contains(list, "read_file in session job-brief-3") {
			break
		}
		if i > 1500 {
			t.Fatalf("run 3's ask was never shown: %s\n%s", list, js.jobs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	out = js.until("last: run 3 (session job-brief-3)", "answer: Report three.")
	require.Contains(t, out, "refused: read_file: the approval expired unanswered")
	list, _ := bxctl(t, js.bin, "approvals", "--state", js.state)
	require.Contains(t, list, "no calls wait for approval", "the expired ask was left pending")

	// Deleted: brief's file goes; at 13:00 another job runs in the tick
	// where brief would have, and brief does not.
	require.NoError(t, os.Remove(filepath.Join(layout.Jobs.In(js.state), "brief.toml")))
	js.owned(&layout.Jobs, "other.toml", job("other", `cron = "0 13 * * *"`, "other prompt"))
	js.until("job other: cron 0 13 * * *")
	n := len(js.srv.Requests(1))
	js.srv.Script(fake.Reply{Reasoning: "Other.", Content: "Other done."})
	js.at("2026-12-01T13:00:00Z")
	out = js.until("last: run 1 (session job-other-1)", "answer: Other done.")
	require.NotContains(t, out, "job brief", "a deleted job is still listed")
	require.Equal(t, n+1, len(js.srv.Requests(1)), "a deleted job ran")

	// Missed: Boxmaker is down from 13:00 to 17:30 over four of other's
	// hourly times (edited to hourly); at start it runs once, as a catch-up.
	js.owned(&layout.Jobs, "other.toml", job("other", `every = "1h"`, "hourly prompt"))
	js.until("job other: every 1h", "next 2026-12-01T14:00:00Z")
	syscall.Kill(pidOf(t, js.bin+"/bxctl", "up", js.state), syscall.SIGTERM)
	<-exited
	js.at("2026-12-01T17:30:00Z")
	n = len(js.srv.Requests(1))
	selftestReplies(js.srv)
	js.srv.Script(fake.Reply{Reasoning: "Caught up.", Content: "Caught up once."})
	js.up()
	js.until("last: run 2 (session job-other-2)", "a catch-up for times missed while loopd was down", "answer: Caught up once.", "next 2026-12-01T18:00:00Z")
	// A marker job, first seen in a tick after the catch-up's, runs in a
	// later one still: by its end any second catch-up run would have run.
	js.owned(&layout.Jobs, "marker.toml", job("marker", `at = "2026-12-01T17:31:00Z"`, "marker prompt"))
	js.until("job marker: at 2026-12-01T17:31:00Z")
	js.srv.Script(fake.Reply{Reasoning: "Mark.", Content: "Marked."})
	js.at("2026-12-01T17:31:00Z")
	out = js.until("last: run 1 (session job-marker-1)", "answer: Marked.")
	require.Contains(t, out, "every 1h, deliver log, next 2026-12-01T18:00:00Z, 2 runs", "the missed times ran more than once")
	require.Equal(t, n+3+1+1, len(js.srv.Requests(1)), "the self-test's three calls, one catch-up run and the marker, no more")
}
