package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// statusWait bounds !status's question to loopd: a loopd that accepts
// and never answers costs the thread one "did not answer" reply.
var statusWait = 5 * time.Second

// statusReply is !status: loopd's view of this thread's session and of
// the roles it talks to, posted in the thread. It changes nothing.
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
	g.reply(ctx, post.ChannelID, root, StatusText(st))
}

// StatusText is the !status post for st: every word loopd sent that
// could carry text (the model's name, job names) rendered plain.
func StatusText(st *wire.SessionStatus) string {
	var b strings.Builder
	b.WriteString("Boxmaker status\n")
	roles := []string{"gatewayd up", "loopd up"}
	for _, r := range st.Roles {
		state := "down"
		if r.Up {
			state = "up"
		}
		roles = append(roles, render.Plain(r.Role)+" "+state)
	}
	fmt.Fprintf(&b, "- roles: %s\n", strings.Join(roles, ", "))
	full := "size unknown"
	if st.SlotContext > 0 {
		full = fmt.Sprintf("%d of %d tokens (%d%%)", st.ContextTokens, st.SlotContext, st.ContextTokens*100/st.SlotContext)
	}
	fmt.Fprintf(&b, "- model: %s on slot %d; this thread's context %s\n", render.Plain(st.Model), st.Slot, full)
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
	b.WriteString("Approvals, fleet memory and the audit anchor: `bxctl status` on the host.")
	return b.String()
}
