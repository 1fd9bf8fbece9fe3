package gateway

import (
	"context"
	"crypto/subtle"
	"fmt"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// usage is the approval commands' shape, for every usage reply.
const usage = "`!approve <id> <code>` (this call only), `!approve <id> <code> session` (and the same call for the rest of the session), `!approve <id> <code> always` (and a grant proposal), `!deny <id> <code> [reason]` or `!revoke <id>` (end a session allowance)"

// command handles a message starting with '!'. It never reaches the
// model. Approval commands from anyone but an approver, for an id not
// pending in this thread, or sent before the approval's last part, are
// ignored (another Boxmaker in a shared thread may hold the id) and
// logged; one whose code is not the approval's is refused in the thread.
func (g *Gateway) command(ctx context.Context, post *mattermost.Post, text string) {
	fields := strings.Fields(text)
	verb := fields[0]
	switch verb {
	case "!revoke":
		id, err := int64(0), error(nil)
		if len(fields) == 2 {
			id, err = strconv.ParseInt(fields[1], 10, 64)
		}
		if len(fields) != 2 || err != nil || id < 1 {
			g.reply(ctx, post.ChannelID, post.Thread(), "Usage: `!revoke <id>`, in the thread of the approval that made the session allowance.")
			return
		}
		if !g.approvers[post.UserID] {
			g.log.Warn("revoke ignored: the user is not an approver; see docs/runbook.md#gateway-not-approver", "user", post.UserID, "allowance", id, "post", post.ID)
			return
		}
		g.revokeCommand(ctx, post, id)
	case "!approve", "!deny":
		scope, ok := wire.ScopeCall, true
		if verb == "!approve" && len(fields) > 3 {
			scope, ok = wire.ParseAnswerScope(fields[3:])
		}
		if len(fields) < 2 || !ok {
			g.reply(ctx, post.ChannelID, post.Thread(), "Usage: "+usage+", in the approval's thread; the code is in the approval's last part.")
			return
		}
		id, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || id < 1 {
			g.reply(ctx, post.ChannelID, post.Thread(), "Usage: "+usage+"; the id is the number in the approval.")
			return
		}
		code := ""
		if len(fields) > 2 {
			code = fields[2]
		}
		if !g.approvers[post.UserID] {
			g.log.Warn("approval command ignored: the user is not an approver; see docs/runbook.md#gateway-not-approver",
				"user", post.UserID, "approval", id, "post", post.ID, "command", verb)
			return
		}
		reason := ""
		if verb == "!deny" && len(fields) > 3 {
			reason = strings.Join(fields[3:], " ")
		}
		g.answer(ctx, post, id, code, verb == "!approve", reason, scope)
	case "!why", "!forget":
		// Memory commands are the owner's: anyone else's is ignored and
		// logged, like an approval command. memoryd serves them on
		// memchat.sock (memory.go), which takes nothing else.
		if !g.approvers[post.UserID] {
			g.log.Warn("memory command ignored: the user is not an approver; see docs/runbook.md#gateway-not-approver",
				"user", post.UserID, "post", post.ID, "command", verb)
			return
		}
		if g.cfg.MemoryChatSocket == "" {
			g.reply(ctx, post.ChannelID, post.Thread(), fmt.Sprintf("`%s` is not served in this chat: gatewayd has no memchat.sock to ask, so nothing was looked up or forgotten. On the host run `bxctl memory why ID` or `bxctl memory forget ID` (the id as recall shows it); see docs/runbook.md#memory-chat-commands", verb))
			return
		}
		go g.memoryCommand(ctx, post, verb, text) // memoryd may take a moment; the event stream must not wait
	case "!stop":
		go g.stopTurn(ctx, post) // loopd may take a moment; the event stream must not wait
	case "!status":
		go g.statusReply(ctx, post) // bounded by statusWait; the event stream must not wait
	default:
		g.reply(ctx, post.ChannelID, post.Thread(), "Unknown command. Commands: "+usage+", `!stop`, `!status`; start a message with `!!` to send a literal `!`.")
	}
}

// answer hands an approver's answer to the approval's connection, if id
// is pending in this thread, its last part was posted before the command
// and code is the approval's. A wrong or missing code is refused in the
// thread and logged, and counts as no answer: text in the thread may
// imitate an approval's layout, never its code.
func (g *Gateway) answer(ctx context.Context, post *mattermost.Post, id int64, typed string, approve bool, reason string, scope wire.AnswerScope) {
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
	code, err := wire.ParseApprovalCode(typed)
	if err != nil || subtle.ConstantTimeCompare([]byte(code), []byte(a.code)) != 1 {
		g.log.Warn("approval command refused: wrong or missing code; see docs/runbook.md#approval-code-wrong",
			"approval", id, "post", post.ID, "user", post.UserID)
		g.reply(ctx, post.ChannelID, post.Thread(), fmt.Sprintf("That answer was not taken: the code is missing or is not approval %d's, so nothing was answered. Copy the id and the code from the approval's last part, posted by Boxmaker itself (a post that only looks like one has no valid code): %s; see docs/runbook.md#approval-code-wrong", id, usage))
		return
	}
	select {
	case a.answers <- chatAnswer{code: code, approve: approve, reason: reason, user: post.UserID, scope: scope}:
	default:
		g.log.Info("approval command ignored: an answer is already on its way", "approval", id, "post", post.ID)
	}
}
