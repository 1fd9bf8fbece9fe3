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
type Stream struct {
	Client *Client
	Log    *slog.Logger
	// OnEvent gets every event but hello, in sequence order.
	OnEvent func(ctx context.Context, e *Event)
	// OnGap is called, before any later event, when events were lost:
	// a hello with a new connection id after the first, or a sequence
	// number out of order.
	OnGap func(ctx context.Context)
	// OnConnected is called after each hello (tests wait on it).
	OnConnected func(connectionID string)
	// MinBackoff and MaxBackoff bound the wait between failed connects
	// (defaults 250ms and 30s).
	MinBackoff, MaxBackoff time.Duration
	// PingEvery is how often the client pings the server; a ping not
	// answered within PingEvery closes the connection (default 30s).
	PingEvery time.Duration

	connID  string // the server's id of our connection; "" before the first hello
	nextSeq int64  // the seq of the next event we expect
}

// errGap ends a connection whose events came out of sequence.
var errGap = errors.New("event out of sequence")

// Run keeps the stream connected until ctx ends.
func (s *Stream) Run(ctx context.Context) error {
	lo, hi := s.MinBackoff, s.MaxBackoff
	if lo <= 0 {
		lo = 250 * time.Millisecond
	}
	if hi <= 0 {
		hi = 30 * time.Second
	}
	wait := lo
	for ctx.Err() == nil {
		ok, err := s.once(ctx)
		if ctx.Err() != nil {
			break
		}
		if ok {
			wait = lo
		}
		s.Log.Warn("mattermost websocket closed; reconnecting", "err", err.Error(), "wait", wait.String())
		jitter := time.Duration(rand.Int64N(int64(wait)/2 + 1))
		select {
		case <-time.After(wait/2 + jitter):
		case <-ctx.Done():
		}
		if !ok {
			wait = min(wait*2, hi)
		}
	}
	return nil
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

// once runs one connection. It reports whether it got as far as reading
// an event (so the backoff can start again from its minimum).
func (s *Stream) once(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+s.Client.token.Reveal())
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	c, resp, err := websocket.Dial(dctx, s.url(), &websocket.DialOptions{HTTPClient: s.Client.http, HTTPHeader: h})
	dcancel()
	if err != nil {
		if resp != nil {
			return false, fmt.Errorf("dial: status %d", resp.StatusCode)
		}
		return false, fmt.Errorf("dial: %v", scrub(err))
	}
	defer c.CloseNow()
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
	read := false
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			return read, fmt.Errorf("read: %v", err)
		}
		read = true
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
		if err := s.handle(ctx, e); err != nil {
			c.Close(websocket.StatusNormalClosure, "")
			return read, err
		}
	}
}

func (s *Stream) handle(ctx context.Context, e *Event) error {
	if e.Event == "hello" {
		h, err := ParseHello(e)
		if err != nil {
			return err
		}
		lost := s.connID != "" && h.ConnectionID != s.connID
		s.connID, s.nextSeq = h.ConnectionID, e.Seq+1
		if s.OnConnected != nil {
			s.OnConnected(h.ConnectionID)
		}
		if lost && s.OnGap != nil {
			s.OnGap(ctx)
		}
		return nil
	}
	if e.Seq != s.nextSeq {
		// Something was skipped or repeated: start again with a new
		// connection, whose hello makes the caller fetch the gap.
		s.connID = "lost"
		return fmt.Errorf("%w: got %d, want %d", errGap, e.Seq, s.nextSeq)
	}
	s.nextSeq++
	s.OnEvent(ctx, e)
	return nil
}
