package gateway

import (
	"context"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
)

// command handles a message starting with '!'. It never reaches the
// model. Approval commands from anyone but an approver, for an id not
// pending in this thread, or sent before the approval's last part, are
// ignored (another Boxmaker in a shared thread may hold the id) and
// logged.
func (g *Gateway) command(ctx context.Context, post *mattermost.Post, text string) {
	fields := strings.Fields(text)
	verb := fields[0]
	switch verb {
	case "!approve", "!deny":
		if len(fields) < 2 || (verb == "!approve" && len(fields) != 2) {
			g.reply(ctx, post.ChannelID, post.Thread(), "Usage: `!approve <id>` or `!deny <id> [reason]`, in the approval's thread.")
			return
		}
		id, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || id < 1 {
			g.reply(ctx, post.ChannelID, post.Thread(), "Usage: `!approve <id>` or `!deny <id> [reason]`; the id is the number in the approval.")
			return
		}
		if !g.approvers[post.UserID] {
			g.log.Warn("approval command ignored: the user is not an approver; see docs/runbook.md#gateway-not-approver",
				"user", post.UserID, "approval", id, "post", post.ID, "command", verb)
			return
		}
		reason := ""
		if verb == "!deny" {
			reason = strings.Join(fields[2:], " ")
		}
		g.answer(post, id, verb == "!approve", reason)
	case "!stop":
		go g.stopTurn(ctx, post) // loopd may take a moment; the event stream must not wait
	default:
		g.reply(ctx, post.ChannelID, post.Thread(), "Unknown command. Commands: `!approve <id>`, `!deny <id> [reason]`, `!stop`; start a message with `!!` to send a literal `!`.")
	}
}

// answer hands an approver's answer to the approval's connection, if id
// is pending in this thread and its last part was posted before the
// command.
func (g *Gateway) answer(post *mattermost.Post, id int64, approve bool, reason string) {
	g.mu.Lock()
	a := g.pending[id]
	var answerable bool
	var lastAt int64
	if a != nil {
		answerable, lastAt = a.answerable, a.lastAt
	}
	g.mu.Unlock()
	switch {
	case a == nil || a.root != post.Thread():
		g.log.Info("approval command ignored: the id is not pending in this thread", "approval", id, "post", post.ID)
		return
	case !answerable || lastAt == 0 || post.CreateAt <= lastAt:
		g.log.Warn("approval command ignored: sent before the approval's last part, or the approval is not answerable in the chat",
			"approval", id, "post", post.ID)
		return
	}
	select {
	case a.answers <- chatAnswer{approve: approve, reason: reason, user: post.UserID}:
	default:
		g.log.Info("approval command ignored: an answer is already on its way", "approval", id, "post", post.ID)
	}
}
