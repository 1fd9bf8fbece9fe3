package gateway

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// fakeJobLoop is a loop.sock that holds job reports only.
type fakeJobLoop struct {
	mu      sync.Mutex
	reports []wire.JobReport
}

func (f *fakeJobLoop) serve(ctx context.Context, peer sockets.Peer, c net.Conn) {
	rpc.NewServer(&wire.Loop, slog.New(slog.DiscardHandler), rpc.On(func(_ context.Context, _ sockets.Peer, r *wire.JobReportsSince) strict.Variant {
		f.mu.Lock()
		defer f.mu.Unlock()
		out := &wire.JobReports{Items: []wire.JobReport{}}
		for _, it := range f.reports {
			if it.Seq > r.After {
				out.Items = append(out.Items, it)
			}
		}
		return out
	})).Serve(ctx, peer, c)
}

// TestJobReportsPostedOnce: a report for a direct message to an allowed
// user is posted there, its header Boxmaker's own with the refused call
// and the answer rendered like any answer; one for a channel gatewayd
// does not hear is not posted anywhere; after a restart nothing is
// posted again, and a new report is.
func TestJobReportsPostedOnce(t *testing.T) {
	jl := &fakeJobLoop{}
	var dm, elsewhere string
	r := newRig(t, func(r *rig, c *gatewayd.Config) {
		dm = r.dm
		elsewhere = r.mm.AddChannel("O", "elsewhere", r.bot.ID, r.owner.ID)
		c.LoopSocket = sockettest.Serve(t, filepath.Join(shortDir(t), "loop"), &wire.Loop, jl.serve)
		jl.reports = []wire.JobReport{
			{Seq: 1, Job: "brief", Run: 1, Session: "job-brief-1", Deliver: "dm:" + r.owner.ID, Outcome: wire.JobAnswered,
				Text: "Three meetings @all ![x](http://evil/)", Denied: []string{"read_file: no grant; see docs/runbook.md#no-grant"}},
			{Seq: 2, Job: "leak", Run: 1, Session: "job-leak-1", Deliver: "channel:" + elsewhere, Outcome: wire.JobAnswered, Text: "posted where it should not be"},
		}
	})
	var got []string
	r.waitLog(t, "the report in the DM", func() bool {
		got = nil
		for _, p := range r.mm.Posts(dm) {
			if p.UserID == r.bot.ID {
				got = append(got, p.Message)
			}
		}
		return len(got) == 1 && strings.Contains(r.logs.String(), "job report not posted")
	})
	for _, want := range []string{"Scheduled job brief, run 1: answered", "Refused: read\\_file: no grant", "Three meetings \uff20all", "!\\[x]\\(http[:]//evil/)"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("report post %q lacks %q", got[0], want)
		}
	}
	if posts := r.mm.Posts(elsewhere); len(posts) != 0 {
		t.Errorf("a report was posted to a channel gatewayd does not hear: %v", posts)
	}
	if !strings.Contains(r.logs.String(), "see docs/runbook.md#gateway-job-report") {
		t.Errorf("the refused destination is not logged with its runbook entry:\n%s", r.logs.String())
	}
	r.stop()
	jl.mu.Lock()
	jl.reports = append(jl.reports, wire.JobReport{Seq: 3, Job: "brief", Run: 2, Session: "job-brief-2", Deliver: "dm:" + r.owner.ID, Outcome: wire.JobStopped, Reason: "tool_iterations: too many"})
	jl.mu.Unlock()
	r.start(t)
	r.waitLog(t, "run 2's report", func() bool {
		n := 0
		for _, p := range r.mm.Posts(dm) {
			if p.UserID == r.bot.ID {
				n++
				if n == 2 && !strings.Contains(p.Message, "run 2: stopped (tool\\_iterations: too many)") {
					t.Errorf("second report = %q", p.Message)
				}
			}
		}
		return n >= 2
	})
	n := 0
	for _, p := range r.mm.Posts(dm) {
		if p.UserID == r.bot.ID {
			n++
		}
	}
	if n != 2 {
		t.Errorf("after a restart the DM has %d reports, want 2 (run 1 once, run 2)", n)
	}
}

// TestJobApprovalInApproversDM: an ask from a job's run (a session with
// no thread) is posted in a new thread of the approver's direct channel,
// opened by a post naming the job, and answered there like any other.
func TestJobApprovalInApproversDM(t *testing.T) {
	r := newRig(t, nil)
	call := wire.PendingCall{ID: 11, Session: "job-morning-brief-3", Tool: "read_file", Arguments: []byte(`{"path":"/home/owner/Reports/today.txt"}`), Expires: "2026-11-30T10:00:00Z", Code: testCode}
	c := r.courier(t, call)
	if p, ok := c.Recv().(*wire.ApprovalPosted); !ok || p.ID != 11 || !p.Answerable {
		t.Fatalf("ApprovalPosted = %+v", p)
	}
	var root string
	for _, p := range r.mm.Posts(r.dm) {
		if p.UserID == r.bot.ID && p.RootID == "" && strings.Contains(p.Message, "Scheduled job morning-brief asks to run a tool (session job-morning-brief-3)") {
			root = p.ID
		}
	}
	if root == "" {
		t.Fatalf("no post naming the job in the approver's DM: %v", r.mm.Posts(r.dm))
	}
	if parts := r.botPosts(root); len(parts) < 2 || !strings.Contains(parts[len(parts)-1].Message, "!approve 11") {
		t.Fatalf("the approval is not in the job's thread: %v", parts)
	}
	r.post(t, r.owner, r.dm, root, "!approve 11 "+testCode)
	if a, ok := c.Recv().(*wire.OwnerAnswer); !ok || a.ID != 11 || !a.Approve {
		t.Fatalf("OwnerAnswer = %+v", a)
	}
	for _, tc := range []struct {
		id  string
		job string
		ok  bool
	}{{"job-a-1", "a", true}, {"job-a-b-12", "a-b", true}, {"job--1", "", false}, {"job-a-", "", false}, {"job-a-x", "", false}, {"mm-abc", "", false}} {
		if job, ok := jobOf(tc.id); ok != tc.ok || job != tc.job {
			t.Errorf("jobOf(%q) = %q, %v; want %q, %v", tc.id, job, ok, tc.job, tc.ok)
		}
	}
}
