package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// statusWait bounds !status's question to loopd: a loopd that accepts
// and never answers costs the thread one "did not answer" reply.
var statusWait = 5 * time.Second

// statusReply is !status: this thread's session and the whole
// installation as loopd gathers it from the roles it already talks to
// (wire.StatusQuery), posted in the thread. It changes nothing.
func (g *Gateway) statusReply(ctx context.Context, post *mattermost.Post) {
	root := post.Thread()
	qctx, cancel := context.WithTimeout(ctx, statusWait)
	defer cancel()
	st, err := rpc.Ask[*wire.SessionStatus](qctx, &wire.Loop, g.cfg.LoopSocket, &wire.StatusQuery{Session: SessionPrefix + root})
	if err != nil {
		if qctx.Err() != nil && ctx.Err() == nil {
			g.reply(ctx, post.ChannelID, root, fmt.Sprintf("Boxmaker status: loopd did not answer within %v; gatewayd is up. See docs/runbook.md#loopd-not-running", statusWait))
			return
		}
		g.reply(ctx, post.ChannelID, root, "Boxmaker status: "+render.Plain(loopFailed(err).Error()))
		return
	}
	g.reply(ctx, post.ChannelID, root, StatusText(st, time.Now()))
}

// StatusText is the !status post for st, each item of `bxctl status`
// (docs/commands.md): the roles and their versions, the model, its slot
// and llama-server's answer, this thread's context, epoch and
// compactions, the last turn's cache reuse and today's prefill, pending
// approvals and allowances, fleet memory's outbox, the audit anchor's
// age, the jobs' next runs. Every word loopd sent that could carry text
// (names, ids, errors) is rendered plain; root is the thread's session.
func StatusText(st *wire.SessionStatus, now time.Time) string {
	var b strings.Builder
	b.WriteString("Boxmaker status\n")
	roles := []string{"gatewayd up (version " + render.Plain(daemon.Version()) + ")", "loopd up (version " + render.Plain(st.Version) + ")"}
	for _, r := range st.Roles {
		state := "down (" + render.Plain(r.Detail) + ")"
		if r.Up {
			state = "up (version " + render.Plain(r.Version) + ")"
		}
		roles = append(roles, render.Plain(r.Role)+" "+state)
	}
	fmt.Fprintf(&b, "- roles: %s\n", strings.Join(roles, ", "))
	full := "size unknown"
	if st.SlotContext > 0 {
		full = fmt.Sprintf("%d of %d tokens (%d%%)", st.ContextTokens, st.SlotContext, st.ContextTokens*100/st.SlotContext)
	}
	fmt.Fprintf(&b, "- model: %s on slot %d; %s; this thread's context %s\n", render.Plain(st.Model), st.Slot, render.Plain(orUnknown(st.Server)), full)
	state := "idle"
	switch {
	case st.Approval:
		state = "a turn waits for an approval"
	case st.Running:
		state = "a turn is running"
	}
	fmt.Fprintf(&b, "- this thread: epoch %d, %d compaction(s), last turn %d, %s\n", st.Epoch, st.Compactions, st.Turn, state)
	fmt.Fprintf(&b, "- cache: the last turn re-read %d tokens beyond the new suffix and reused %d; today's prefill %d.%d s\n",
		st.Reread, st.Cached, st.TodayPrefillMS/1000, st.TodayPrefillMS%1000/100)
	where := func(session string) string {
		if session == st.Session {
			return "this thread"
		}
		return "session " + render.Plain(session)
	}
	switch {
	case st.BrokerError != "":
		fmt.Fprintf(&b, "- approvals and allowances: unknown (%s)\n", render.Plain(st.BrokerError))
	default:
		if len(st.Approvals) == 0 {
			b.WriteString("- approvals: none pending\n")
		}
		for _, a := range st.Approvals {
			fmt.Fprintf(&b, "- approval #%d: %s in %s, expires %s\n", a.ID, render.Plain(a.Tool), where(a.Session), render.Plain(a.Expires))
		}
		if len(st.Allowances) == 0 {
			b.WriteString("- allowances: none in force\n")
		}
		for _, a := range st.Allowances {
			// Another session's scope (an exact shell line, a path) may
			// hold what that session alone should show: it is named
			// here, and read in its own thread or with bxctl allowances.
			if a.Session == st.Session {
				fmt.Fprintf(&b, "- allowance #%d: %s (%s) in %s, until %s\n", a.ID, render.Plain(a.Tool), render.Plain(a.Scope), where(a.Session), render.Plain(a.Expires))
				continue
			}
			fmt.Fprintf(&b, "- allowance #%d: %s in %s, until %s (its scope is shown in its own thread, and by bxctl allowances)\n", a.ID, render.Plain(a.Tool), where(a.Session), render.Plain(a.Expires))
		}
	}
	fmt.Fprintf(&b, "- fleet memory: %s\n", fleetText(st))
	if at, err := time.Parse(time.RFC3339, st.AnchorAt); err == nil {
		fmt.Fprintf(&b, "- audit anchor: newest %s, %s ago\n", at.UTC().Format(time.RFC3339), now.Sub(at).Truncate(time.Minute))
	} else {
		b.WriteString("- audit anchor: none recorded (`bxctl audit anchor` records one)\n")
	}
	if len(st.Jobs) == 0 {
		b.WriteString("- jobs: none\n")
	}
	for _, j := range st.Jobs {
		next := j.Next
		if next == "" {
			next = "never"
		}
		fmt.Fprintf(&b, "- job %s: next %s\n", render.Plain(j.Name), render.Plain(next))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// fleetText is fleet memory's line, as bxctl status words it.
func fleetText(st *wire.SessionStatus) string {
	f := st.Fleet
	switch {
	case f == nil:
		return "unknown (" + render.Plain(orUnknown(st.FleetError)) + ")"
	case !f.Configured:
		return "not configured (memory is local only)"
	case f.LastError != "":
		return fmt.Sprintf("outbox %d pending; Honcho's last answer: %s (next try %s); see docs/runbook.md#fleet-outbox-stuck", f.Pending, render.Plain(f.LastError), render.Plain(f.NextTry))
	}
	return fmt.Sprintf("outbox %d pending, %d sent; Honcho's last answer: ok", f.Pending, f.Sent)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
