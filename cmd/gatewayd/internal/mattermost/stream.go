package mattermost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Stream is the bot's WebSocket event stream. It keeps the server's
// connection id and the next sequence number it expects, so that a
// reconnect resumes where it stopped (api4/websocket.go,
// platform/web_conn.go): events still in the server's dead queue are
// replayed with no hello; when they are not, the server sends a hello
// with a new connection id, and the stream calls OnGap so the caller can
// fetch what was missed over REST.
//
// The read loop never waits on a handler: events and gaps go, in order,
// into a bounded queue, so pings are answered while a handler waits on
// REST (429 retries included). A dispatcher hands each event to its
// thread's lane (a "posted" event's thread root; every other event to
// one lane of its own): each lane is an ordered queue with its own
// worker, so a slow thread delays only itself, and a thread's events are
// handled one at a time in read order. A gap is a barrier: it waits for
// every lane to drain, runs alone, and events read after it wait for it.
// The bound counts every event read and not yet handled, in any lane.
// An event that finds it full is not taken: the connection is closed
// without advancing the sequence number, so the reconnect replays it
// from the server's dead queue or, when that is gone, fetches the gap.
type Stream struct {
	Client *Client
	Log    *slog.Logger
	// OnEvent gets every event but hello, on its lane's worker (never
	// on the read loop): a thread's events in sequence order, different
	// threads' at once.
	OnEvent func(ctx context.Context, e *Event)
	// OnGap is called alone, after every earlier event and before any
	// later one, when events were lost: a hello with a new
	// connection id after the first, or a sequence number out of order.
	OnGap func(ctx context.Context)
	// GapFirst makes the first hello call OnGap too: the caller has
	// events to catch up on from before this stream (a restart).
	GapFirst bool
	// OnConnected is called on the read loop after each hello (tests
	// wait on it).
	OnConnected func(connectionID string)
	// MinBackoff and MaxBackoff bound the wait between connects
	// (defaults 250ms and 30s). The wait doubles after every connection
	// that lasted less than StableAfter (default 30s) and starts again
	// from MinBackoff after one that lasted longer, so a server that
	// closes after each frame cannot make the client reconnect (and
	// fetch a gap) at the minimum rate.
	MinBackoff, MaxBackoff, StableAfter time.Duration
	// QueueLen bounds the events read and not yet handled, every lane
	// together (default DefaultQueueLen).
	QueueLen int
	// PingEvery is how often the client pings the server; a ping not
	// answered within PingEvery closes the connection (default 30s).
	PingEvery time.Duration

	connID  string // the server's id of our connection; "" before the first hello
	nextSeq int64  // the seq of the next event we expect
	owed    bool   // a gap is known but not yet queued for the worker
	work    chan item
	slots   chan struct{} // one per item read and not yet handled; cap QueueLen

	mu    sync.Mutex       // guards lanes
	lanes map[string]*lane // the lanes with work, by key

	onWait func(time.Duration) // test hook: each backoff wait, before jitter
}

// DefaultQueueLen is the default bound on events waiting for the worker
// (the server's own send queue is 256, platform/web_conn.go).
const DefaultQueueLen = 256

// item is one unit of the worker's work: an event, or a gap to fetch.
type item struct {
	e   *Event
	gap bool
}

// lane is one thread's ordered queue; its worker runs while it has work.
type lane struct {
	queue []*Event // guarded by Stream.mu
}

// laneOf is e's lane: a posted event's thread root, else "" (one lane
// for every other event).
func laneOf(e *Event) string {
	if e.Event != "posted" {
		return ""
	}
	p, err := ParsePosted(e)
	if err != nil {
		return ""
	}
	return "thread:" + p.Post.Thread()
}

// errBusy ends a connection whose event found the worker's queue full.
var errBusy = errors.New("event queue full; the handler is behind")

// errGap ends a connection whose events came out of sequence.
var errGap = errors.New("event out of sequence")

// Run keeps the stream connected until ctx ends. Handlers get ctx, not
// a connection's: a dropped connection does not cancel their work.
func (s *Stream) Run(ctx context.Context) error {
	lo, hi, stable := s.MinBackoff, s.MaxBackoff, s.StableAfter
	if lo <= 0 {
		lo = 250 * time.Millisecond
	}
	if hi <= 0 {
		hi = 30 * time.Second
	}
	if stable <= 0 {
		stable = 30 * time.Second
	}
	n := s.QueueLen
	if n <= 0 {
		n = DefaultQueueLen
	}
	s.work = make(chan item, n)
	s.slots = make(chan struct{}, n)
	s.lanes = map[string]*lane{}
	done := make(chan struct{})
	go func() { defer close(done); s.dispatch(ctx) }()
	defer func() { <-done }()
	wait := lo
	for ctx.Err() == nil {
		up, err := s.once(ctx)
		if ctx.Err() != nil {
			break
		}
		if up >= stable {
			wait = lo
		}
		if s.onWait != nil {
			s.onWait(wait)
		}
		s.Log.Warn("mattermost websocket closed; reconnecting", "err", err.Error(), "up", up.String(), "wait", wait.String())
		jitter := time.Duration(rand.Int64N(int64(wait)/2 + 1))
		select {
		case <-time.After(wait/2 + jitter):
		case <-ctx.Done():
		}
		if up < stable {
			wait = min(wait*2, hi)
		}
	}
	return nil
}

// dispatch hands items, in the order read, to their lanes, and runs
// gaps alone. It returns when ctx ends, once every lane's worker has.
func (s *Stream) dispatch(ctx context.Context) {
	var running sync.WaitGroup
	defer running.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-s.work:
			if it.gap {
				running.Wait() // every earlier event first
				if s.OnGap != nil {
					s.OnGap(ctx)
				}
				<-s.slots
				continue
			}
			key := laneOf(it.e)
			s.mu.Lock()
			l, busy := s.lanes[key]
			if !busy {
				l = &lane{}
				s.lanes[key] = l
			}
			l.queue = append(l.queue, it.e)
			s.mu.Unlock()
			if !busy {
				running.Add(1)
				go func() { defer running.Done(); s.drain(ctx, key, l) }()
			}
		}
	}
}

// drain is lane l's worker: it handles l's events in order until l is
// empty, then forgets l (the next event of its thread starts a new one).
func (s *Stream) drain(ctx context.Context, key string, l *lane) {
	for {
		s.mu.Lock()
		if len(l.queue) == 0 || ctx.Err() != nil {
			delete(s.lanes, key)
			s.mu.Unlock()
			return
		}
		e := l.queue[0]
		l.queue = l.queue[1:]
		s.mu.Unlock()
		s.OnEvent(ctx, e)
		<-s.slots
	}
}

// queue takes it for the dispatcher without waiting; false if QueueLen
// items are already read and not yet handled.
func (s *Stream) queue(it item) bool {
	select {
	case s.slots <- struct{}{}:
		s.work <- it // never blocks: work holds no more items than slots
		return true
	default:
		return false
	}
}

func (s *Stream) url() string {
	u := *s.Client.base
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	u.Path += "/api/v4/websocket"
	if s.connID != "" {
		u.RawQuery = url.Values{"connection_id": {s.connID}, "sequence_number": {strconv.FormatInt(s.nextSeq, 10)}}.Encode()
	}
	return u.String()
}

// once runs one connection. It reports how long the connection was up
// (0 if it never was), so the backoff can start again from its minimum
// only after a connection that stayed.
func (s *Stream) once(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+s.Client.token.Reveal())
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	c, resp, err := websocket.Dial(dctx, s.url(), &websocket.DialOptions{HTTPClient: s.Client.http, HTTPHeader: h})
	dcancel()
	if err != nil {
		if resp != nil {
			return 0, fmt.Errorf("dial: status %d", resp.StatusCode)
		}
		return 0, fmt.Errorf("dial: %v", scrub(err))
	}
	defer c.CloseNow()
	start := time.Now()
	c.SetReadLimit(MaxEventJSON)
	every := s.PingEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pc := context.WithTimeout(ctx, every)
				err := c.Ping(pctx)
				pc()
				if err != nil {
					c.CloseNow()
					return
				}
			}
		}
	}()
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			return time.Since(start), fmt.Errorf("read: %v", err)
		}
		if typ != websocket.MessageText {
			continue // binary frames are msgpack (model/websocket_request.go); gatewayd asks for none
		}
		e, err := ParseEvent(b)
		if err != nil {
			s.Log.Warn("mattermost websocket: unreadable frame dropped", "err", err.Error())
			continue
		}
		if e.Event == "" {
			continue // a response to a request; gatewayd sends none
		}
		if err := s.handle(e); err != nil {
			c.Close(websocket.StatusNormalClosure, "")
			return time.Since(start), err
		}
	}
}

// handle runs on the read loop: it checks the sequence and queues the
// work, never waiting for it.
func (s *Stream) handle(e *Event) error {
	if e.Event == "hello" {
		h, err := ParseHello(e)
		if err != nil {
			return err
		}
		if s.connID != "" && h.ConnectionID != s.connID || s.connID == "" && s.GapFirst {
			s.owed = true
		}
		s.connID, s.nextSeq = h.ConnectionID, e.Seq+1
		if s.OnConnected != nil {
			s.OnConnected(h.ConnectionID)
		}
		return s.payGap()
	}
	if e.Seq != s.nextSeq {
		// Something was skipped or repeated: start again with a new
		// connection, whose hello makes the caller fetch the gap.
		s.connID = "lost"
		return fmt.Errorf("%w: got %d, want %d", errGap, e.Seq, s.nextSeq)
	}
	if err := s.payGap(); err != nil {
		return err
	}
	if !s.queue(item{e: e}) {
		// nextSeq stays: the reconnect asks for this event again.
		return errBusy
	}
	s.nextSeq++
	return nil
}

// payGap queues a known gap before anything later.
func (s *Stream) payGap() error {
	if !s.owed {
		return nil
	}
	if !s.queue(item{gap: true}) {
		return errBusy
	}
	s.owed = false
	return nil
}
