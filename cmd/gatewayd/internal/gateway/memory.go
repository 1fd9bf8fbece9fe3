package gateway

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// memoryUsage is the memory commands' shape.
const memoryUsage = "`!why ID` (where a memory came from) or `!forget ID` (then `!forget ID CODE` with the code Boxmaker answers), the id as recall shows it: a note (n12), a session record (session S epoch E turn T record R) or an identity entry (memory.md#2)"

// recordKey is a session record's id as recall shows it: its last word
// is a number that might read as a code, so a whole key has none.
var recordKey = regexp.MustCompile(`^session \S+ epoch \d+ turn \d+ record \d+$`)

// memoryCommand relays an approver's `!why` or `!forget` to memoryd on
// memchat.sock and posts the answer in the thread. The caller has
// checked the poster is an approver; memoryd judges the rest (the
// thread's project, the code).
func (g *Gateway) memoryCommand(ctx context.Context, post *mattermost.Post, verb, text string) {
	rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), verb))
	id, code := rest, ""
	if verb == "!forget" {
		id, code = splitCode(rest)
	}
	if id == "" {
		g.reply(ctx, post.ChannelID, post.Thread(), "Usage: "+memoryUsage+".")
		return
	}
	var req strict.Variant = &wire.ChatWhy{ID: id, Thread: post.Thread(), Channel: post.ChannelID, User: post.UserID}
	if verb == "!forget" {
		req = &wire.ChatForget{ID: id, Thread: post.Thread(), Channel: post.ChannelID, User: post.UserID, Code: code}
	}
	v, err := rpc.Call(ctx, &wire.Memchat, g.cfg.MemoryChatSocket, req, func(strict.Variant) error { return nil })
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		g.log.Info("memory command refused by memoryd", "command", verb, "post", post.ID, "err", we.Msg)
		g.reply(ctx, post.ChannelID, post.Thread(), "Nothing was done: "+render.Plain(we.Msg))
		return
	case err != nil:
		g.log.Error("memory command failed: memoryd not reached; see docs/runbook.md#memoryd-unavailable", "command", verb, "post", post.ID, "err", err.Error())
		g.reply(ctx, post.ChannelID, post.Thread(), "Nothing was done: memoryd could not be reached ("+render.Plain(err.Error())+"); see docs/runbook.md#memoryd-unavailable")
		return
	}
	switch a := v.(type) {
	case *wire.WhyChain:
		var b strings.Builder
		fmt.Fprintf(&b, "Why %s:", render.Plain(a.ID))
		for _, s := range a.Steps {
			b.WriteString("\n- " + render.Plain(s))
		}
		b.WriteString("\nThe audit log's links (the memory call's decision, the untrusted result's seq and hash) are on the host: `bxctl memory why " + render.Plain(a.ID) + "`.")
		g.replyParts(ctx, post, b.String())
	case *wire.ForgetCode:
		if c, err := wire.ParseApprovalCode(a.Code); err != nil || c != a.Code {
			g.log.Error("memory command: memoryd sent a code that is not one", "command", verb)
			g.reply(ctx, post.ChannelID, post.Thread(), "Nothing was done: memoryd's answer was malformed; see docs/runbook.md#memoryd-unavailable")
			return
		}
		g.reply(ctx, post.ChannelID, post.Thread(), fmt.Sprintf("Forget %s? %s\nTo forget it, answer in this thread within %d minutes: `!forget %s %s`",
			render.Plain(a.ID), render.Plain(a.What), a.Minutes, render.Plain(a.ID), a.Code))
	case *wire.MemoryDone:
		g.replyParts(ctx, post, "Receipt: "+render.Plain(a.Msg))
	default:
		g.log.Error("memory command: memoryd answered out of turn", "command", verb, "answer", v.Tag())
		g.reply(ctx, post.ChannelID, post.Thread(), "Nothing was done: memoryd answered "+v.Tag()+"; see docs/runbook.md#memoryd-unavailable")
	}
}

// splitCode cuts a trailing code off a `!forget` argument: the last word,
// when it is six code symbols and the rest is still an id (a session
// record key keeps all its words).
func splitCode(rest string) (id, code string) {
	i := strings.LastIndexByte(rest, ' ')
	if i < 0 {
		return rest, ""
	}
	last := rest[i+1:]
	if _, err := wire.ParseApprovalCode(last); err != nil || recordKey.MatchString(rest) {
		return rest, ""
	}
	return strings.TrimSpace(rest[:i]), last
}

// replyParts posts text in the thread, split to Mattermost's post size.
func (g *Gateway) replyParts(ctx context.Context, post *mattermost.Post, text string) {
	for _, part := range mattermost.Split(text, mattermost.MaxRunes) {
		g.reply(ctx, post.ChannelID, post.Thread(), part)
	}
}
