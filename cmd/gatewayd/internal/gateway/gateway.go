// Package gateway is gatewayd's daemon: it carries the owner's messages
// from Mattermost to loopd and the answers back, and posts brokerd's
// pending approvals in the asking thread, relaying the owner's answers.
//
// Invariants:
//   - only posts [hearer] accepts reach loopd or the command parser;
//     a message starting with '!' is a command and never reaches the
//     model ("!!" escapes a literal '!');
//   - a thread is a session ("mm-" + the root post's id); messages that
//     arrive while its turn runs go together as the next turn; every
//     post is handled at most once, whether it came over the WebSocket
//     or from a gap fetched after a lost connection;
//   - every turn's outcome is posted in its thread once: when it ends,
//     or, if gatewayd was down then, at its next start (delivery.go);
//   - a job's report is posted only to a channel gatewayd hears or a
//     direct message to an allowlisted user, whatever loopd names
//     (jobs.go);
//   - everything posted that Boxmaker did not write passes through
//     package render: no mention, no embedded image, nothing hidden;
//   - an approval is answered only by an approver, only in its thread,
//     only after its last part is posted and only while brokerd keeps
//     its connection open; a command from anyone else is ignored and
//     logged;
//   - a heard post's files reach loopd as descriptors only; their content
//     is kept whole or not at all under attachments/, or images/ for an
//     image (attach.go, attachstore.go), and a file not kept gets one
//     line to the owner in the thread;
//   - gatewayd opens no TCP listener: it listens only on gateway.sock.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Gateway is the running daemon.
type Gateway struct {
	cfg  gatewayd.Config
	log  *slog.Logger
	mm   *mattermost.Client
	me   *mattermost.User
	hear *hearer

	life        context.Context // the daemon's life: turns outlive a WebSocket connection
	approvers   map[string]bool
	dead        *deadLog
	cursor      *cursor      // the posts handled, durable across restarts
	delivery    *delivery    // the answers posted per session, durable across restarts
	attachments *attachments // the files posted with heard messages (attach.go)

	postLocks [64]sync.Mutex // per session, by hash (catchup.go)

	// Test knobs: how often typing is refreshed, how often watched
	// sessions are asked again, and the stream's backoff.
	typingEvery   time.Duration
	sweepEvery    time.Duration
	stream        *mattermost.Stream
	lookupRetries []time.Duration // waits before judging a post again after a failed thread lookup
	jobsEvery     time.Duration   // how often job reports are asked for (jobs.go); DefaultJobPoll if 0

	mu       sync.Mutex // guards the fields below
	seen     map[string]bool
	seenFIFO []string
	convos   map[string]*convo // by thread root id
	mine     map[string]bool   // thread roots this Boxmaker has posted in (at most maxMine)
	mineFIFO []string
	channels map[string]bool     // channels whose gaps are fetched
	pending  map[int64]*approval // approvals posted, by id
	held     map[int64]*held     // session allowances revocable from their thread, by id (allowance.go)
	watched  map[string]bool     // sessions that may still have an outcome to post (catchup.go)
	since    int64               // newest create_at seen, for gap fetches
	floor    int64               // a gap fetch never reaches before it: a first start's time
}

// maxSeen bounds the set of handled post ids.
const maxSeen = 4096

// MaxCatchUp is how far back a start fetches the posts that arrived
// while gatewayd was stopped: older ones are not answered out of the blue.
const MaxCatchUp = 24 * time.Hour

// Run loads the token, connects and serves until ctx ends.
func Run(ctx context.Context, log *slog.Logger, cfg gatewayd.Config) error {
	tok, err := secret.NewStore(log).Load(cfg.Token)
	if err != nil {
		return daemon.Refuse(fmt.Errorf("bot token: %v", err))
	}
	mm, err := mattermost.NewClient(cfg.URL, tok, cfg.CAFile)
	if err != nil {
		return daemon.Refuse(err)
	}
	g, err := New(ctx, log, cfg, mm)
	if err != nil {
		return daemon.Refuse(err)
	}
	return g.Serve(ctx)
}

// New prepares a gateway: who the bot is, the allowlisted users' direct
// channels, and the approval posts a previous run left (marked dead).
func New(ctx context.Context, log *slog.Logger, cfg gatewayd.Config, mm *mattermost.Client) (*Gateway, error) {
	me, err := mm.Me(ctx)
	if err != nil {
		return nil, fmt.Errorf("who am I: %v; see docs/runbook.md#gateway-mattermost", err)
	}
	g := &Gateway{cfg: cfg, log: log, mm: mm, me: me, typingEvery: 4 * time.Second, sweepEvery: DefaultSweepEvery, lookupRetries: lookupRetries,
		seen: map[string]bool{}, convos: map[string]*convo{}, mine: map[string]bool{},
		channels: map[string]bool{}, pending: map[int64]*approval{}, held: map[int64]*held{}, approvers: map[string]bool{}, watched: map[string]bool{},
		since: time.Now().UnixMilli()}
	g.hear = &hearer{me: me.ID, name: lower(me.Username), users: set(cfg.Allow.Users), channels: set(cfg.Allow.Channels)}
	for _, id := range cfg.Approvers() {
		g.approvers[id] = true
	}
	for _, id := range cfg.Allow.Channels {
		g.channels[id] = true
	}
	for _, u := range cfg.Allow.Users {
		ch, err := mm.DirectChannel(ctx, me.ID, u)
		if err != nil {
			return nil, fmt.Errorf("direct channel with %s: %v; see docs/runbook.md#gateway-mattermost", u, err)
		}
		g.channels[ch.ID] = true
	}
	dir := layout.Gateway.In(cfg.StateDir)
	if g.dead, err = openDeadLog(ctx, dir, mm, log); err != nil {
		return nil, err
	}
	if g.cursor, err = openCursor(dir); err != nil {
		return nil, err
	}
	if g.delivery, err = openDelivery(dir); err != nil {
		return nil, err
	}
	g.attachments = openAttachments(cfg.StateDir)
	if err := g.attachments.sweep(); err != nil {
		return nil, fmt.Errorf("attachments: removing parts a stopped gatewayd left: %v; see docs/runbook.md#gateway-file-unfetchable", err)
	}
	// A previous run's handled posts pass the seen-set gate no more;
	// what arrived since the newest of them is fetched once connected
	// (at most MaxCatchUp back).
	for _, id := range g.cursor.state.Handled {
		g.markSeen(id)
	}
	if g.cursor.since() > 0 {
		g.since = max(g.cursor.since(), time.Now().Add(-MaxCatchUp).UnixMilli())
		if g.since > g.cursor.since() {
			log.Warn("gatewayd was stopped longer than the catch-up window; older posts are not answered; see docs/runbook.md#gateway-cursor", "stopped_since", g.cursor.since(), "window", MaxCatchUp.String())
		}
	} else {
		// A first start answers nothing from before it (the channels'
		// history), but everything from it on: a post made while the
		// WebSocket first connects is fetched once it has, and a gap
		// fetch before the first handled post never reaches back into
		// the history (since 0 would ask for all of it).
		// (A post of the same millisecond as the start is after it: a
		// fetch takes what is newer than since.)
		g.since = time.Now().UnixMilli() - 1
		g.floor = g.since
	}
	// Always catch up on the first hello: after a restart, what arrived
	// while gatewayd was down; after a first start, what arrived while
	// it connected.
	g.stream = &mattermost.Stream{Client: mm, Log: log, OnEvent: g.onEvent, OnGap: g.fetchGap, GapFirst: true}
	return g, nil
}

// Stream is the WebSocket stream (tests set its backoff and hooks).
func (g *Gateway) Stream() *mattermost.Stream { return g.stream }

// Serve runs the event stream and gateway.sock until ctx ends.
func (g *Gateway) Serve(ctx context.Context) error {
	l, err := rpc.Listen(&wire.Gateway, sockets.Config{Dir: g.cfg.SocketDir, AllowUIDs: g.cfg.AllowUIDs, MaxConns: 256, Logger: g.log})
	if err != nil {
		return daemon.Refuse(err)
	}
	defer l.Close()
	g.log.Info("serving", "gateway", l.Path(), "mattermost", g.cfg.URL, "bot", g.me.Username)
	g.life = ctx
	// Before any new post is handled: the answers of turns that ended
	// while gatewayd was down (catchup.go).
	g.deliverMissed(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); g.stream.Run(ctx) }()
	go func() { defer wg.Done(); g.sweep(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); g.deliverJobs(ctx) }() // the owner's jobs' reports (jobs.go)
	err = l.Serve(ctx, rpc.NewServer(&wire.Gateway, g.log, rpc.Stream(g.serveApproval)).Serve)
	wg.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func set(ids []string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// advance moves the gap-fetch watermark to createAt if it is newer.
func (g *Gateway) advance(createAt int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if createAt > g.since {
		g.since = createAt
	}
}

// wasSeen reports whether a post id was already handled.
func (g *Gateway) wasSeen(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen[id]
}

// markSeen records a heard post's id and reports whether it was new.
func (g *Gateway) markSeen(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[id] {
		return false
	}
	g.seen[id] = true
	g.seenFIFO = append(g.seenFIFO, id)
	if len(g.seenFIFO) > maxSeen {
		delete(g.seen, g.seenFIFO[0])
		g.seenFIFO = g.seenFIFO[1:]
	}
	return true
}

// onEvent handles one WebSocket event.
func (g *Gateway) onEvent(ctx context.Context, e *mattermost.Event) {
	if e.Event != "posted" {
		return // edits are not new messages; typing and the rest are for people
	}
	p, err := mattermost.ParsePosted(e)
	if err != nil {
		g.log.Warn("unreadable posted event dropped", "err", err.Error())
		return
	}
	g.handle(ctx, p)
}

// fetchGap fetches, from every channel gatewayd hears in, the posts
// since the newest it saw (less a margin for clock steps), and handles
// those it has not: the WebSocket lost events.
func (g *Gateway) fetchGap(ctx context.Context) {
	g.mu.Lock()
	since := max(g.since-5000, g.floor)
	var chans []string
	for id := range g.channels {
		chans = append(chans, id)
	}
	g.mu.Unlock()
	g.log.Info("mattermost events were lost; fetching the gap", "since", since, "channels", len(chans))
	for _, ch := range chans {
		posts, err := g.mm.PostsSince(ctx, ch, since)
		if err != nil {
			g.log.Warn("gap fetch failed", "channel", ch, "err", err.Error())
			continue
		}
		typ := mattermost.ChannelDirect
		if g.hear.channels[ch] {
			typ = mattermost.ChannelOpen // allowlisted channels follow the channel rules whatever their type
		}
		for _, p := range posts {
			if p.DeleteAt != 0 || p.CreateAt <= since { // deleted, or an edit of an older post
				continue
			}
			g.handle(ctx, &mattermost.Posted{Post: p, ChannelType: typ})
		}
	}
}
