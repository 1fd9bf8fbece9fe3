package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// jobCursor is gateway/jobs.json: the sequence number of the newest job
// report posted (or refused), so each report is posted once across
// restarts. It is written after the post: a crash between the two posts
// that report again at the next start (a duplicate, never a loss of one
// gatewayd could still read from loopd).
type jobCursor struct {
	After int64 `json:"after"`
}

// DefaultJobPoll is how often gatewayd asks loopd for new job reports.
const DefaultJobPoll = 5 * time.Second

// maxJobRounds bounds the job_reports_since requests of one poll.
const maxJobRounds = 8

// deliverJobs posts the reports of the owner's jobs (loop.sock's
// job_reports_since) to their channel or direct message, at start and
// at every poll, until ctx ends. A record it cannot read stops job
// delivery (loudly) rather than post every report again.
func (g *Gateway) deliverJobs(ctx context.Context) {
	path := layout.GatewayJobs(g.cfg.StateDir)
	var cur jobCursor
	if err := readOwn(path, "job report cursor", "gateway-job-report", &cur); err != nil {
		g.log.Error("job reports are not posted", "err", err.Error())
		return
	}
	every := g.jobsEvery
	if every <= 0 {
		every = DefaultJobPoll
	}
	for {
		g.postJobReports(ctx, path, &cur)
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (g *Gateway) postJobReports(ctx context.Context, path string, cur *jobCursor) {
	for range maxJobRounds {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rs, err := rpc.Ask[*wire.JobReports](actx, &wire.Loop, g.cfg.LoopSocket, &wire.JobReportsSince{After: cur.After})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				g.log.Warn("asking loopd for job reports failed; asked again at the next poll; see docs/runbook.md#loopd-not-running", "err", err.Error())
			}
			return
		}
		for _, r := range rs.Items {
			if r.Seq <= cur.After {
				g.log.Warn("loopd sent an older job report; see docs/runbook.md#loopd-not-running", "seq", r.Seq)
				return
			}
			if !g.postJobReport(ctx, r) {
				return // Mattermost failed: the same report is tried at the next poll
			}
			cur.After = r.Seq
			b, _ := strict.Marshal(cur)
			if err := writeAtomic(path, b); err != nil {
				g.log.Error("job report cursor not written; the report may be posted again after a restart", "err", err.Error())
			}
		}
		if !rs.More || len(rs.Items) == 0 {
			return
		}
	}
}

// postJobReport posts r where its job file says, if that is a channel
// gatewayd hears or a direct message to an allowlisted user: loopd names
// the destination, and a loopd that is not to be believed must not make
// the bot post anywhere else. It reports false when Mattermost failed
// (try again); a refused destination is logged and passed over.
func (g *Gateway) postJobReport(ctx context.Context, r wire.JobReport) bool {
	kind, id, _ := strings.Cut(r.Deliver, ":")
	var channel string
	switch {
	case kind == "channel" && g.hear.channels[id]:
		channel = id
	case kind == "dm" && g.hear.users[id]:
		ch, err := g.mm.DirectChannel(ctx, g.me.ID, id)
		if err != nil {
			g.log.Warn("job report: the direct channel could not be opened; see docs/runbook.md#gateway-mattermost", "job", r.Job, "run", r.Run, "err", err.Error())
			return false
		}
		channel = ch.ID
	default:
		g.log.Error("job report not posted: its destination is not a channel gatewayd hears nor a direct message to an allowed user; see docs/runbook.md#gateway-job-report",
			"job", r.Job, "run", r.Run, "deliver", r.Deliver)
		return true
	}
	posts := jobPosts(r)
	root := ""
	for i, text := range posts {
		p, err := g.mm.CreatePostProp(ctx, channel, root, text, PropJob, fmt.Sprintf("%s:%d:%d/%d", r.Job, r.Run, i+1, len(posts)))
		if err != nil {
			g.log.Warn("job report: posting failed; tried again at the next poll; see docs/runbook.md#gateway-mattermost", "job", r.Job, "run", r.Run, "err", err.Error())
			return false
		}
		if root == "" {
			root = p.ID
		}
	}
	g.log.Info("job report posted", "job", r.Job, "run", r.Run, "channel", channel, "parts", len(posts))
	return true
}

// PropJob is the post prop naming the job, run and part a report post
// carries: "<job>:<run>:<part>/<parts>".
const PropJob = "boxmaker_job"

// jobPosts renders a report: a first line of Boxmaker's own (the job's
// name, its run and how it ended, with each call brokerd refused), then
// the answer as any answer is rendered; the rest of a long answer goes
// in the first post's thread.
func jobPosts(r wire.JobReport) []string {
	head := fmt.Sprintf("Scheduled job %s, run %d: %s", render.Plain(r.Job), r.Run, render.Plain(string(r.Outcome)))
	if r.Reason != "" {
		head += " (" + render.Plain(r.Reason) + ")"
	}
	for _, d := range r.Denied {
		head += "\nRefused: " + render.Plain(d)
	}
	if r.Text == "" {
		return []string{head}
	}
	parts := render.Answer(r.Text)
	if len(head)+2+len(parts[0]) <= mattermost.MaxRunes {
		parts[0] = head + "\n\n" + parts[0]
		return parts
	}
	return append([]string{head}, parts...)
}

// jobOf is the job whose run session is id ("job-<name>-<n>", loopd's
// package jobs), if it is one.
func jobOf(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, wire.JobSessionPrefix)
	i := strings.LastIndexByte(rest, '-')
	if !ok || i < 1 || strings.Trim(rest[i+1:], "0123456789") != "" || i == len(rest)-1 {
		return "", false
	}
	return rest[:i], true
}

// jobApproval is the check phase for an ask made by a job's run, which
// has no thread: a new thread in the direct channel of the first
// approver whose direct messages gatewayd hears, opened by a post naming
// the job, so the approval is answered there like any other.
func (g *Gateway) jobApproval(ctx context.Context, call wire.PendingCall, code, job string) (*approval, *wire.Error) {
	for _, u := range g.cfg.Approvers() {
		ch, err := g.mm.DirectChannel(ctx, g.me.ID, u)
		if err != nil {
			g.log.Warn("job approval: the direct channel could not be opened", "approval", call.ID, "err", err.Error())
			return nil, postRefusal(wire.Unavailable, "the job's approval could not be posted; see docs/runbook.md#gateway-mattermost")
		}
		g.mu.Lock()
		heard := g.channels[ch.ID]
		g.mu.Unlock()
		if !heard {
			continue
		}
		head := fmt.Sprintf("Scheduled job %s asks to run a tool (session %s); the approval follows in this thread.", render.Plain(job), render.Plain(call.Session))
		p, err := g.mm.CreatePost(ctx, ch.ID, "", head)
		if err != nil {
			g.log.Error("posting a job's approval failed", "approval", call.ID, "err", err.Error())
			return nil, postRefusal(wire.Unavailable, "the job's approval could not be posted; see docs/runbook.md#gateway-mattermost")
		}
		if err := g.dead.add(call.ID, p.ID); err != nil {
			g.log.Error("recording an approval post failed", "approval", call.ID, "err", err.Error())
		}
		return &approval{id: call.ID, code: code, root: p.ID, channel: ch.ID, answers: make(chan chatAnswer, 1), replaced: make(chan struct{})}, nil
	}
	return nil, postRefusal(wire.Denied, "no approver's direct messages are heard by gatewayd, so job %s's approval cannot be posted; answer it with bxctl approve", job)
}
