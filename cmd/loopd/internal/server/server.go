// Package server is loopd's loop.sock: it takes user messages for sessions
// and streams each turn's events back, running at most one turn per
// session at a time.
//
// Invariants:
//   - a message is acknowledged ([wire.Accepted]) only once it is on disk;
//   - messages that arrive while a session's turn runs are logged at once
//     for the next turn and sent to the model together, in that turn;
//   - a turn left open by a stopped or failed loopd is closed (its missing
//     tool results marked interrupted, never re-run) before the session's
//     next message is logged or its outcomes are read (answers_since);
//   - every frame is decoded strictly (package rpc's server loop);
//     anything but a [wire.Send], a [wire.Stop], a [wire.AnswersSince]
//     (answers.go), a [wire.Compact] (epoch.go), a [wire.ListJobs] or a
//     [wire.JobReportsSince] (jobs) or a [wire.StatusQuery] (status.go,
//     read-only) is refused with forbidden, and a
//     refused frame ends the connection;
//   - a stopped turn is closed on disk as interrupted before its
//     followers hear [wire.Stopped] (stop.go);
//   - an epoch changes only while no turn runs in the session, and at
//     most once between two turns (epoch.go).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/epoch"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Manager owns the open sessions.
type Manager struct {
	State    string // the state directory; sessions/ is under it
	Engine   *turn.Engine
	Baseline func(id, channel string) (sessionlog.Baseline, error) // a new session's baseline
	Log      *slog.Logger
	// Epoch changes epochs (epoch.go); nil: a session keeps its epoch.
	Epoch  *epoch.Changer
	Policy Policy
	Jobs   func() *wire.JobList // bxctl jobs (list_jobs); nil: no scheduler
	// JobReports answers gatewayd's job_reports_since; nil: no scheduler.
	JobReports func(after int64) *wire.JobReports
	// Status is what gatewayd's !status shows of loopd's config (status.go).
	Status StatusInfo
	// Vision is what the self-test read of the model (llama-server's
	// /props modalities.vision): whether it can see images (images.go).
	Vision bool

	ctx context.Context // the daemon's life; turns stop with it
	srv *rpc.Server     // loop.sock's server loop
	wg  sync.WaitGroup  // running turns

	mu       sync.Mutex // guards sessions
	sessions map[string]*live
}

// live is one open session. Lock order: Manager.mu before live.mu.
type live struct {
	mu      sync.Mutex // guards the fields below and appends of user records
	s       *session.Session
	running bool
	turn    int64         // the running turn
	cur     []*subscriber // following the running turn
	next    []*subscriber // following the next turn
	stop    turnStop      // cancels the running turn (package-level stop.go)
	idle    *time.Timer   // fires the idle trigger (epoch.go); nil while running
	tried   bool          // an epoch change was tried since the last turn
}

type subscriber struct {
	ch chan strict.Variant
}

// send never blocks a turn: a client too slow to take 1024 events loses
// the rest (its connection will time out and it can read the log).
func (sub *subscriber) send(v strict.Variant) {
	select {
	case sub.ch <- v:
	default:
	}
}

// Start prepares the manager to run turns until ctx ends.
func (m *Manager) Start(ctx context.Context) {
	m.ctx = ctx
	m.sessions = map[string]*live{}
	m.srv = rpc.NewServer(&wire.Loop, m.Log, rpc.Stream(m.send),
		rpc.On(func(_ context.Context, _ sockets.Peer, st *wire.Stop) strict.Variant { return m.Stop(st.Session) }),
		rpc.On(m.answersSince), rpc.On(m.compact), rpc.On(m.listJobs), rpc.On(m.jobReports), rpc.On(m.status))
}

// listJobs answers bxctl jobs.
func (m *Manager) listJobs(context.Context, sockets.Peer, *wire.ListJobs) strict.Variant {
	if m.Jobs == nil {
		return &wire.Error{Op: "list_jobs", Kind: wire.Unavailable, Msg: "this loopd runs no scheduler"}
	}
	return m.Jobs()
}

// jobReports answers gatewayd's job_reports_since.
func (m *Manager) jobReports(_ context.Context, _ sockets.Peer, r *wire.JobReportsSince) strict.Variant {
	if m.JobReports == nil {
		return &wire.Error{Op: "job_reports_since", Kind: wire.Unavailable, Msg: "this loopd runs no scheduler"}
	}
	return m.JobReports(r.After)
}

// Wait waits for running turns to stop (after the daemon's ctx ends).
func (m *Manager) Wait() { m.wg.Wait() }

func (m *Manager) open(id, channel string) (*live, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.sessions[id]; ok {
		return l, nil
	}
	s, err := session.Open(m.State, id, func() (sessionlog.Baseline, error) { return m.Baseline(id, channel) })
	if err != nil {
		return nil, err
	}
	l := &live{s: s}
	m.sessions[id] = l
	return l, nil
}

// ChannelDiffers refuses a message from another channel than the
// session's: a thread is in one channel, and the channel picks the
// session's project in memoryd, so a session id reused from another
// channel must not carry its messages into this one's memory.
type ChannelDiffers struct{ Session, Has, Got string }

func (e *ChannelDiffers) Error() string {
	return fmt.Sprintf("session %s belongs to channel %s, and this message came from channel %s; a session's channel never changes; see docs/runbook.md#session-channel-differs", e.Session, e.Has, e.Got)
}

// Submit logs a user message from channel ("" for none) and either
// starts a turn or queues it for the next one. It returns whether it
// was queued.
func (m *Manager) Submit(id, channel, text string, sub *subscriber) (bool, error) {
	return m.SubmitFiles(id, channel, text, nil, sub)
}

// SubmitFiles is [Manager.Submit] of a message with files attached (their
// descriptors; gatewayd holds the content in attachments/ and images/).
func (m *Manager) SubmitFiles(id, channel, text string, files []wire.FileRef, sub *subscriber) (bool, error) {
	l, err := m.open(id, channel)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// A session made before channels were recorded has none, and stays
	// outside every project; a message without one (bxctl chat) joins
	// the session as it is.
	if has := l.s.Baseline.Channel; has != "" && channel != "" && has != channel {
		return false, &ChannelDiffers{Session: id, Has: has, Got: channel}
	}
	if l.running {
		if err := l.s.Append(&sessionlog.User{Turn: l.turn + 1, Text: text, Files: files}); err != nil {
			return false, err
		}
		l.next = append(l.next, sub)
		return true, nil
	}
	if err := turn.Interrupted(l.s); err != nil {
		return false, err
	}
	t := session.StateOf(l.s.Records()).NextTurn
	if err := l.s.Append(&sessionlog.User{Turn: t, Text: text, Files: files}); err != nil {
		return false, err
	}
	l.stopIdle()
	l.running, l.tried, l.turn, l.cur = true, false, t, []*subscriber{sub}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.run(l)
	}()
	return false, nil
}

// run runs turns until no message waits, then starts the idle period.
// The caller has added to m.wg for it.
func (m *Manager) run(l *live) {
	for {
		l.mu.Lock()
		t, subs := l.turn, l.cur
		l.mu.Unlock()
		emit := func(v strict.Variant) {
			for _, sub := range subs {
				sub.send(v)
			}
		}
		m.beforeTurn(l, emit)
		l.mu.Lock()
		s := l.s
		l.tried = false
		l.mu.Unlock()
		ctx := l.stop.begin(&l.mu, m.ctx)
		err := m.Engine.Run(ctx, s, t, emit)
		if stopped := l.stop.end(&l.mu); stopped && err != nil {
			err = m.stopped(l, t, emit)
		} else if err != nil && m.ctx.Err() == nil {
			m.Log.Error("turn failed", "session", l.s.ID, "turn", t, "err", err.Error())
			if ferr := m.failed(l, t, err, emit); ferr == nil {
				err = nil
			} else {
				m.Log.Error("closing the failed turn failed", "session", l.s.ID, "turn", t, "err", ferr.Error())
			}
		}
		if err != nil {
			m.Log.Error("turn failed", "session", l.s.ID, "turn", t, "err", err.Error())
			kind, msg := wire.Internal, "the turn failed: "+err.Error()
			if m.ctx.Err() != nil {
				kind, msg = wire.Unavailable, "loopd is stopping; the turn will be closed as interrupted"
			}
			emit(&wire.Error{Op: "turn", Kind: kind, Msg: msg})
		}
		l.mu.Lock()
		if len(l.next) == 0 || m.ctx.Err() != nil {
			for _, sub := range l.next {
				sub.send(&wire.Error{Op: "turn", Kind: wire.Unavailable, Msg: "loopd is stopping; your message is logged and goes with the session's next turn"})
			}
			l.running, l.cur, l.next = false, nil, nil
			if m.ctx.Err() == nil {
				m.armIdle(l)
			}
			l.mu.Unlock()
			return
		}
		l.turn, l.cur, l.next = l.turn+1, l.next, nil
		l.mu.Unlock()
	}
}

// Serve is the loop.sock handler: package rpc's server loop over
// [wire.Loop], with a route for each of [wire.Send], [wire.Stop] and
// [wire.AnswersSince].
func (m *Manager) Serve(ctx context.Context, peer sockets.Peer, c net.Conn) {
	m.srv.Serve(ctx, peer, c)
}

// send takes one user message and streams its turn's events.
func (m *Manager) send(ctx context.Context, _ sockets.Peer, c *rpc.Conn, send *wire.Send) error {
	if err := check(send); err != nil {
		return c.Send(&wire.Error{Op: "send", Kind: wire.Invalid, Msg: err.Error()})
	}
	sub := &subscriber{ch: make(chan strict.Variant, 1024)}
	queued, err := m.SubmitFiles(send.Session, send.Channel, send.Text, send.Files, sub)
	var cd *ChannelDiffers
	if errors.As(err, &cd) {
		m.Log.Warn("message refused", "session", send.Session, "err", err.Error())
		return c.Send(&wire.Error{Op: "send", Kind: wire.Denied, Msg: err.Error()})
	}
	if err != nil {
		m.Log.Error("submit", "session", send.Session, "err", err.Error())
		return c.Send(&wire.Error{Op: "send", Kind: wire.Unavailable, Msg: "the message could not be logged: " + err.Error()})
	}
	if err := c.Send(&wire.Accepted{Session: send.Session, Queued: queued, Notice: m.imageNotice(send.Files)}); err != nil {
		return err
	}
	return m.follow(ctx, c, sub)
}

// channelID is a Mattermost id (model.NewId, mattermost/mattermost
// server/public/model/utils.go): 26 lower-case base32 characters.
var channelID = regexp.MustCompile(`^[a-z0-9]{26}$`)

func check(s *wire.Send) error {
	if err := wire.CheckSessionID(s.Session); err != nil {
		return err
	}
	if strings.HasPrefix(s.Session, wire.JobSessionPrefix) {
		return fmt.Errorf("session %s is a scheduled job's run, written only by the scheduler; read it in sessions/%s, or talk in another session", s.Session, s.Session)
	}
	if s.Channel != "" && !channelID.MatchString(s.Channel) {
		return fmt.Errorf("channel %q is not a Mattermost channel id (26 lower-case letters and digits)", s.Channel)
	}
	if s.Text == "" {
		return errors.New("the message is empty")
	}
	if len(s.Text) > wire.MaxMessage {
		return fmt.Errorf("the message is %d bytes, over the limit of %d", len(s.Text), wire.MaxMessage)
	}
	return wire.CheckFiles(s.Files)
}

// follow writes a turn's events until its terminal one.
func (m *Manager) follow(ctx context.Context, c *rpc.Conn, sub *subscriber) error {
	for {
		select {
		case v := <-sub.ch:
			if err := c.Send(v); err != nil {
				return err
			}
			if wire.Loop.Final(v) {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
