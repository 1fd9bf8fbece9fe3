package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// convo is one thread's conversation. Guarded by Gateway.mu.
type convo struct {
	channel string
	busy    bool      // a turn runs
	queue   []message // messages for the next turn
}

// message is one heard message for loopd: its text and the descriptors
// of the files kept from its post.
type message struct {
	text  string
	files []wire.FileRef
}

// SessionPrefix starts every session id gatewayd makes.
const SessionPrefix = wire.ChatSessionPrefix

// handle takes one post, from the WebSocket or a gap fetch. A post is
// marked seen only once it is judged heard, so posts nobody may send
// cannot fill the seen set, and a post whose thread could not be looked
// up is judged again later rather than dropped.
func (g *Gateway) handle(_ context.Context, p *mattermost.Posted) {
	g.judge(p, 0)
}

// lookupRetries are the default waits before judging again a post whose
// thread could not be looked up.
var lookupRetries = []time.Duration{2 * time.Second, 10 * time.Second, time.Minute}

func (g *Gateway) judge(p *mattermost.Posted, attempt int) {
	ctx := g.life
	g.advance(p.Post.CreateAt)
	if g.wasSeen(p.Post.ID) {
		return
	}
	var lookupErr error
	text, why := g.hear.hear(p, func(root string) bool {
		ok, err := g.ownThread(ctx, root)
		if err != nil {
			lookupErr = err
		}
		return ok
	})
	if why != heardOK {
		if lookupErr != nil {
			if attempt < len(g.lookupRetries) && ctx.Err() == nil {
				g.log.Warn("thread lookup failed; the post will be judged again", "post", p.Post.ID, "attempt", attempt+1, "err", lookupErr.Error())
				time.AfterFunc(g.lookupRetries[attempt], func() { g.judge(p, attempt+1) })
				return
			}
			g.log.Error("thread lookup failed again; the post is not answered; see docs/runbook.md#gateway-mattermost", "post", p.Post.ID, "user", p.Post.UserID, "err", lookupErr.Error())
			return
		}
		g.notHeard(p, why)
		return
	}
	if !g.markSeen(p.Post.ID) {
		return
	}
	post := p.Post
	if err := g.cursor.mark(post.ID, post.CreateAt); err != nil {
		// Handled anyway: the owner's message is not dropped, but a
		// restart may handle it again.
		g.log.Error("recording a handled post failed; see docs/runbook.md#gateway-cursor", "post", post.ID, "err", err.Error())
	}
	// A command is recognised after leading blanks (" !stop" is still
	// !stop, never the model's); other text keeps its indentation.
	if t := strings.TrimLeft(text, " \t\r\n"); strings.HasPrefix(t, "!!") {
		text = t[1:]
	} else if strings.HasPrefix(t, "!") {
		g.command(ctx, post, t)
		return
	}
	if strings.TrimSpace(text) == "" && len(post.FileIDs) == 0 {
		return
	}
	if len(text) > wire.MaxMessage {
		g.reply(ctx, post.ChannelID, post.Thread(), fmt.Sprintf("That message is %d bytes, over Boxmaker's limit of %d; it was not sent; see docs/runbook.md#gateway-message-too-long", len(text), wire.MaxMessage))
		return
	}
	// The files are fetched here, in the thread's lane: the thread's
	// next post waits, so its messages stay in order.
	got := g.fetchFiles(ctx, SessionPrefix+post.Thread(), post)
	if len(got.lines) > 0 {
		g.reply(ctx, post.ChannelID, post.Thread(), strings.Join(got.lines, "\n"))
	}
	if strings.TrimSpace(text) == "" {
		if len(got.files) == 0 {
			return
		}
		text = "(files only, no text)"
	}
	g.submit(ctx, post.ChannelID, post.Thread(), message{text: text, files: got.files})
}

// notHeard logs a post that is not for this Boxmaker: at Debug, except
// an approval command from someone who is not heard, which is recorded
// at Warn with the user id (Done-when: ignored and recorded).
func (g *Gateway) notHeard(p *mattermost.Posted, why verdict) {
	if why != ignoredOwn && isApprovalCommand(g.hear.strip(p.Post.Message)) {
		g.log.Warn("approval command ignored: the post is not heard; see docs/runbook.md#gateway-not-approver",
			"user", p.Post.UserID, "post", p.Post.ID, "channel", p.Post.ChannelID, "why", string(why))
		return
	}
	g.log.Debug("post not heard", "post", p.Post.ID, "user", p.Post.UserID, "why", string(why))
}

// isApprovalCommand reports whether msg starts with !approve or !deny
// (after blanks, any case).
func isApprovalCommand(msg string) bool {
	t := strings.ToLower(strings.TrimLeft(msg, " \t\r\n"))
	return strings.HasPrefix(t, "!approve") || strings.HasPrefix(t, "!deny")
}

// Bounds on what chat members can make gatewayd hold.
const (
	// MaxBusyThreads is how many threads may have a turn running or
	// waiting at once; a message for another thread is refused. Each
	// running turn holds a loop.sock connection, and loopd serves 16 at
	// once (sockets.DefaultMaxConns): 8 leaves room for bxctl and for
	// gatewayd's own !stop.
	MaxBusyThreads = 8
	// MaxQueued is how many messages may wait for a thread's next turn;
	// one more is refused.
	MaxQueued = 16
	// maxMine is how many of this Boxmaker's thread roots are
	// remembered; an older one is looked up on the server again.
	maxMine = 4096
)

// submit starts a turn for the thread, or queues text for its next one.
// A thread's convo lives while a turn runs or waits, no longer.
func (g *Gateway) submit(ctx context.Context, channel, root string, msg message) {
	g.mu.Lock()
	c := g.convos[root]
	switch {
	case c == nil && len(g.convos) >= MaxBusyThreads:
		g.mu.Unlock()
		g.log.Warn("message refused: too many threads busy", "thread", root, "busy", MaxBusyThreads)
		g.reply(ctx, channel, root, fmt.Sprintf("Boxmaker is already answering in %d threads; this message was not sent. Send it again when one has finished; see docs/runbook.md#gateway-busy", MaxBusyThreads))
		return
	case c == nil:
		c = &convo{channel: channel}
		g.convos[root] = c
	case len(c.queue) >= MaxQueued:
		g.mu.Unlock()
		g.log.Warn("message refused: the thread's queue is full", "thread", root, "queued", MaxQueued)
		g.reply(ctx, channel, root, fmt.Sprintf("%d messages already wait for this thread's next turn; this one was not sent. Wait for the answer, or `!stop`; see docs/runbook.md#gateway-busy", MaxQueued))
		return
	}
	if c.busy {
		c.queue = append(c.queue, msg)
		g.mu.Unlock()
		return
	}
	c.busy = true
	g.markMine(root)
	g.mu.Unlock()
	// The turn runs for the daemon's life, not the WebSocket
	// connection's: a dropped connection must not lose the answer.
	go g.converse(g.life, c, root, msg)
}

// markMine remembers root as one of this Boxmaker's threads, forgetting
// the oldest past maxMine. Caller holds g.mu.
func (g *Gateway) markMine(root string) {
	if g.mine[root] {
		return
	}
	g.mine[root] = true
	g.mineFIFO = append(g.mineFIFO, root)
	if len(g.mineFIFO) > maxMine {
		delete(g.mine, g.mineFIFO[0])
		g.mineFIFO = g.mineFIFO[1:]
	}
}

// converse runs turns for one thread until no message waits, then
// forgets the thread's convo.
func (g *Gateway) converse(ctx context.Context, c *convo, root string, msg message) {
	for {
		g.turn(ctx, c.channel, root, msg)
		g.mu.Lock()
		if len(c.queue) == 0 || ctx.Err() != nil {
			c.busy = false
			c.queue = nil
			if g.convos[root] == c {
				delete(g.convos, root)
			}
			g.mu.Unlock()
			return
		}
		msg, c.queue = batch(c.queue)
		g.mu.Unlock()
	}
}

// batch joins the waiting messages, as many as fit in one loopd message
// (each one fits by itself: handle refuses longer, and a post keeps at
// most wire.MaxFiles files), and returns the rest.
func batch(queue []message) (message, []message) {
	n, size, files := 1, len(queue[0].text), len(queue[0].files)
	for n < len(queue) && size+2+len(queue[n].text) <= wire.MaxMessage && files+len(queue[n].files) <= wire.MaxFiles {
		size += 2 + len(queue[n].text)
		files += len(queue[n].files)
		n++
	}
	out := message{}
	texts := make([]string, n)
	for i, m := range queue[:n] {
		texts[i] = m.text
		out.files = append(out.files, m.files...)
	}
	out.text = strings.Join(texts, "\n\n")
	return out, queue[n:]
}

// turn sends one message to loopd, shows the bot as typing while the
// turn runs, and posts the outcome in the thread. No thinking and no
// status text reach the chat.
func (g *Gateway) turn(ctx context.Context, channel, root string, msg message) {
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(g.typingEvery)
		defer t.Stop()
		for {
			if err := g.mm.Typing(tctx, channel, root); err != nil && tctx.Err() == nil {
				g.log.Debug("typing", "err", err.Error())
			}
			select {
			case <-tctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	session := SessionPrefix + root
	if err := g.delivery.known(channel, root); err != nil {
		// Sent anyway: only an answer that ends while gatewayd is down
		// would be lost, as before the record.
		g.log.Error("recording the session failed; see docs/runbook.md#gateway-delivered", "session", session, "err", err.Error())
	}
	out, turnNo, files, err := g.loopTurn(ctx, session, channel, msg, func(notice string) { g.reply(ctx, channel, root, render.Plain(notice)) })
	stop()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		g.log.Warn("turn failed", "thread", root, "err", err.Error())
		g.reply(ctx, channel, root, "Boxmaker could not answer: "+render.Plain(err.Error()))
		// The connection may have failed while loopd goes on with the
		// turn: its outcome is posted if it ever ends.
		g.watch(session, true)
		return
	}
	if turnNo == 0 {
		g.postOutcomeFiles(ctx, channel, root, session, 0, out, nil, g.uploadPosted(ctx, channel, root, session, files))
		return
	}
	l := g.postLock(session)
	l.Lock()
	defer l.Unlock()
	if e, ok := g.delivery.get(session); ok && e.Turn < turnNo-1 {
		// Earlier turns are not posted yet (one a previous gatewayd sent
		// was still running at its start): they go first, in order, and
		// this one with them if loopd has it.
		g.deliverLocked(ctx, session)
	}
	if e, ok := g.delivery.get(session); !ok || e.Turn < turnNo {
		// The files go up only with the answer they belong to.
		g.postOutcomeFiles(ctx, channel, root, session, turnNo, out, nil, g.uploadPosted(ctx, channel, root, session, files))
	}
}

// postOutcome posts a turn's parts in its thread, each marked with
// [PropTurn] (when the turn is known) and none whose mark is in posted,
// then records the turn delivered. It reports whether all were posted.
func (g *Gateway) postOutcome(ctx context.Context, channel, root, session string, turnNo int64, out []string, posted map[string]bool) bool {
	return g.postOutcomeFiles(ctx, channel, root, session, turnNo, out, posted, nil)
}

// postOutcomeFiles is postOutcome with files (uploaded ids) attached to
// the last part.
func (g *Gateway) postOutcomeFiles(ctx context.Context, channel, root, session string, turnNo int64, out []string, posted map[string]bool, files []string) bool {
	for i, part := range out {
		key, value := "", ""
		if turnNo > 0 {
			key, value = PropTurn, turnProp(session, turnNo, i+1, len(out))
		}
		if posted[value] && value != "" {
			continue
		}
		var attach []string
		if i == len(out)-1 {
			attach = files
		}
		if _, err := g.mm.CreatePostFiles(ctx, channel, root, part, key, value, attach); err != nil {
			g.log.Error("posting the answer failed", "thread", root, "err", err.Error())
			return false
		}
	}
	if turnNo > 0 {
		if err := g.delivery.mark(session, turnNo); err != nil {
			g.log.Error("recording a delivered answer failed; see docs/runbook.md#gateway-delivered", "session", session, "turn", turnNo, "err", err.Error())
		}
	}
	return true
}

// reply posts Boxmaker's own text in a thread.
func (g *Gateway) reply(ctx context.Context, channel, root, text string) {
	if _, err := g.mm.CreatePost(ctx, channel, root, text); err != nil {
		g.log.Error("posting failed", "thread", root, "err", err.Error())
	}
}

// loopTurn is one turn on loop.sock (as bxctl chat does it), naming the
// thread's channel (memoryd's projects are sets of channels): it returns
// the posts to make, or an error whose text is for the owner. The turn's
// interim events show nothing in the chat.
// notice is told loopd's note about the message, if any (an image the
// model will not see), once, when loopd has accepted it.
func (g *Gateway) loopTurn(ctx context.Context, session, channel string, msg message, notice func(string)) ([]string, int64, []wire.PostedFile, error) {
	v, err := rpc.Call(ctx, &wire.Loop, g.cfg.LoopSocket, &wire.Send{Session: session, Text: msg.text, Files: msg.files, Channel: channel}, func(ev strict.Variant) error {
		if a, ok := ev.(*wire.Accepted); ok && a.Notice != "" {
			notice(a.Notice)
		}
		return nil
	})
	if err != nil {
		return nil, 0, nil, loopFailed(err)
	}
	switch e := v.(type) {
	case *wire.Answer:
		if e.Session != session {
			return nil, 0, nil, errors.New("loopd answered for another session; see docs/runbook.md#loopd-not-running")
		}
		return render.Answer(e.Text), e.Turn, e.Files, nil
	case *wire.Stopped:
		return stoppedPosts(e.Reason, e.Msg), e.Turn, nil, nil
	}
	return nil, 0, nil, loopFailed(rpc.NotExpected(&wire.Loop, v))
}

// stoppedPosts is what the thread reads for a stopped turn.
func stoppedPosts(reason wire.StopReason, msg string) []string {
	return []string{"The turn was stopped (" + render.Plain(string(reason)) + "): " + render.Plain(msg)}
}

// loopFailed is what the thread reads when loop.sock failed.
func loopFailed(err error) error {
	if errors.As(err, new(*wire.Error)) {
		return fmt.Errorf("loopd: %s", err.Error())
	}
	return fmt.Errorf("%w; see docs/runbook.md#loopd-not-running", err)
}

// ownThread reports whether root is one of this Boxmaker's threads: one
// it has posted in, asking the server when it does not know. An error
// means the server could not say.
func (g *Gateway) ownThread(ctx context.Context, root string) (bool, error) {
	g.mu.Lock()
	ok := g.mine[root]
	g.mu.Unlock()
	if ok {
		return true, nil
	}
	posts, err := g.mm.Thread(ctx, root)
	if err != nil {
		return false, err
	}
	for _, p := range posts {
		if p.UserID == g.me.ID {
			g.mu.Lock()
			g.markMine(root)
			g.mu.Unlock()
			return true, nil
		}
	}
	return false, nil
}

// stopTurn is !stop: the thread's messages waiting for the next turn are
// dropped, and loopd stops the running turn, whose follower then posts
// that it was stopped.
func (g *Gateway) stopTurn(ctx context.Context, post *mattermost.Post) {
	root := post.Thread()
	g.mu.Lock()
	dropped := 0
	if c := g.convos[root]; c != nil {
		dropped, c.queue = len(c.queue), nil
	}
	g.mu.Unlock()
	done, err := g.loopStop(ctx, SessionPrefix+root)
	switch {
	case err != nil:
		g.reply(ctx, post.ChannelID, root, "Boxmaker could not stop the turn: "+render.Plain(err.Error()))
	case !done.Stopped && dropped == 0:
		g.reply(ctx, post.ChannelID, root, "No turn is running in this thread.")
	case dropped > 0:
		g.reply(ctx, post.ChannelID, root, fmt.Sprintf("Stopped; %d waiting message(s) dropped.", dropped))
	}
}

// loopStop sends one stop for session on loop.sock.
func (g *Gateway) loopStop(ctx context.Context, session string) (*wire.StopDone, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d, err := rpc.Ask[*wire.StopDone](ctx, &wire.Loop, g.cfg.LoopSocket, &wire.Stop{Session: session})
	if err != nil {
		return nil, loopFailed(err)
	}
	return d, nil
}
