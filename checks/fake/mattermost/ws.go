package mattermost

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// Queue sizes (platform/web_conn.go: sendQueueSize 256, deadQueueSize 128).
const (
	sendQueueSize = 256
	deadQueueSize = 128
)

// event is model.WebSocketEvent before its seq is set.
type event struct {
	Event     string         `json:"event"`
	Data      map[string]any `json:"data"`
	Broadcast broadcast      `json:"broadcast"`
	Seq       int64          `json:"seq"`

	reply []byte // a response to a request (wsapi.go): sent as is, no seq
}

// broadcast is model.WebsocketBroadcast's JSON.
type broadcast struct {
	OmitUsers        map[string]bool `json:"omit_users"`
	UserID           string          `json:"user_id"`
	ChannelID        string          `json:"channel_id"`
	TeamID           string          `json:"team_id"`
	ConnectionID     string          `json:"connection_id"`
	OmitConnectionID string          `json:"omit_connection_id"`
}

// conn is platform.WebConn: a user's connection, kept while
// disconnected so that a reconnect can resume it.
type conn struct {
	id     string
	user   string
	seq    int64   // the next seq to assign (writePump: SetSequence, then Sequence++)
	dead   []event // the last deadQueueSize events written
	replay []event // dead-queue events to send again, already numbered
	queue  []event // not yet written
	ws     *websocket.Conn
	gen    int // bumped each time ws changes; a writer of an older gen stops
	wake   chan struct{}
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// inDead is web_conn.go isInDeadQueue: seq is still held.
func (c *conn) inDead(seq int64) bool {
	return len(c.dead) > 0 && seq >= c.dead[0].Seq && seq <= c.dead[len(c.dead)-1].Seq
}

// mentionWord finds @name mentions (app/mention_parser.go splits words
// and trims punctuation; reference silent on details: the fake matches
// @ followed by a username's characters).
var mentionWord = regexp.MustCompile(`@([a-z0-9._-]+)`)

// publishPost sends posted or post_edited to the channel's members, the
// author included (app/post.go publishWebsocketEventForPost); data.post
// is the post's JSON as a string. For posted, a hook adds mentions per
// receiver: a JSON string array of the receiver's id when mentioned
// (app/web_broadcast_hooks.go): the other member of a DM, an @username,
// or @channel/@all/@here outside DMs (app/notification.go). Caller
// holds s.mu.
func (s *Server) publishPost(name string, p *Post, ch *Channel) {
	b, _ := json.Marshal(p)
	author := s.users[p.UserID]
	data := map[string]any{"post": string(b)}
	if name == "posted" {
		data["channel_display_name"] = ch.Name
		data["channel_name"] = ch.Name
		data["channel_type"] = ch.Type
		data["sender_name"] = "@" + author.Username
		data["set_online"] = true
		data["team_id"] = ""
		// app/notification.go SendNotifications: a post with files
		// carries otherFile "true", and image "true" when one of its
		// files' infos IsImage (a mime type starting "image").
		if len(p.FileIDs) != 0 {
			data["otherFile"] = "true"
			for _, id := range p.FileIDs {
				if f, ok := s.files[id]; ok && strings.HasPrefix(f.info.MimeType, "image") {
					data["image"] = "true"
					break
				}
			}
		}
	}
	named := map[string]bool{}
	for _, m := range mentionWord.FindAllStringSubmatch(p.Message, -1) {
		named[m[1]] = true
	}
	everyone := ch.Type != "D" && (named["channel"] || named["all"] || named["here"])
	s.broadcast(ch, "", name, data, func(uid string) map[string]any {
		if name != "posted" || uid == p.UserID {
			return nil
		}
		if (ch.Type == "D") || named[s.users[uid].Username] || everyone {
			m, _ := json.Marshal([]string{uid})
			return map[string]any{"mentions": string(m)}
		}
		return nil
	})
}

// broadcast queues an event for every connection of every member of ch
// but omit (web_hub.go broadcast; ShouldSendEvent checks membership). A
// connection whose send queue is full is closed and removed
// (closeAndRemoveConn), so its next reconnect loses events and gets a
// hello. Caller holds s.mu.
func (s *Server) broadcast(ch *Channel, omit, name string, data map[string]any, extra func(uid string) map[string]any) {
	for id, c := range s.conns {
		if !ch.Members[c.user] || c.user == omit {
			continue
		}
		d := map[string]any{}
		for k, v := range data {
			d[k] = v
		}
		if extra != nil {
			for k, v := range extra(c.user) {
				d[k] = v
			}
		}
		if len(c.queue) >= sendQueueSize {
			if c.ws != nil {
				c.ws.CloseNow()
			}
			c.gen++
			delete(s.conns, id)
			continue
		}
		c.queue = append(c.queue, event{Event: name, Data: d, Broadcast: broadcast{ChannelID: ch.ID}})
		c.signal()
	}
}

// Drop closes every WebSocket connection, as a network failure would.
// With lose, the server also forgets them (as the reaper does after 5
// minutes, or a restart): their next reconnect gets a new connection id.
func (s *Server) Drop(lose bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = false
	for id, c := range s.conns {
		if c.ws != nil {
			c.ws.CloseNow()
			c.ws = nil
		}
		c.gen++
		c.signal()
		if lose {
			delete(s.conns, id)
		}
	}
}

// Stall makes the network stop carrying frames until the next Drop:
// the write pump still numbers each event and keeps it in the dead
// queue (web_conn.go writePump adds to the dead queue as it writes), but
// the client never gets it, as when a connection dies with frames in
// flight. A Drop after a Stall makes the reconnect replay them.
func (s *Server) Stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = true
}

// Replays is how many reconnects resumed from the dead queue with at
// least one event sent again (a test's proof the path ran).
func (s *Server) Replays() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replays
}

// Connections is how many WebSocket connections are attached.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		if c.ws != nil {
			n++
		}
	}
	return n
}

// websocket is api4/websocket.go connectWebSocket with the hub's
// registration (platform/web_hub.go, web_conn.go). A token that names
// no session is refused with 401 before the upgrade (web/handlers.go);
// with no token at all the socket is upgraded and must authenticate
// with an authentication_challenge (wsapi.go), and then, having had no
// session at the upgrade, it always gets a new connection id and a
// hello (connectWebSocket ignores connection_id without a session).
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	s.record(r)
	user := s.auth(r)
	auth := authKind(r)
	if user == "" && token(r) != "" {
		writeAppError(w, newAppError(401, "api.context.session_expired.app_error", "Invalid or expired session, please login again."))
		return
	}
	op := r.Header.Get(OpHeader)
	q := r.URL.Query()
	connID := q.Get("connection_id")
	seq := int64(-1)
	if v := q.Get("sequence_number"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			seq = n
		}
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	var challengeSeq int64
	if user == "" {
		if user, challengeSeq = s.challenge(ws, op); user == "" {
			return
		}
		connID, auth = "", "challenge"
	}
	if connID != "" && seq < 0 {
		// api4/websocket.go: connection_id without a valid
		// sequence_number is logged and the socket closed.
		ws.Close(websocket.StatusPolicyViolation, "invalid sequence_number")
		return
	}
	s.mu.Lock()
	// web_hub.go CheckConn/RemoveInactiveByConnectionID: only an inactive
	// connection of the same user is reused.
	c, ok := s.conns[connID]
	reuse := ok && c.user == user && c.ws == nil
	switch {
	case reuse && c.inDead(seq):
		// writePump: isInDeadQueue -> drainDeadQueue, original seqs, no hello.
		c.replay = nil
		for _, e := range c.dead {
			if e.Seq >= seq {
				c.replay = append(c.replay, e)
			}
		}
		if len(c.replay) > 0 {
			s.replays++
		}
	case reuse && seq == c.seq:
		// !hasMsgLoss: the client is caught up; nothing replayed, no hello.
		c.replay = nil
	case reuse:
		// hasMsgLoss: clearDeadQueue, a new connection id, Sequence = 0,
		// a hello; the active queue kept while disconnected still follows.
		delete(s.conns, c.id)
		c.id, c.seq, c.dead, c.replay = newID(), 0, nil, nil
		c.queue = append([]event{hello(c.id, user)}, c.queue...)
		s.conns[c.id] = c
	default:
		// Not found (reaped, restarted, or still marked active): a new
		// connection, seq from 0, hello first (createHelloMessage).
		if ok && c.user == user {
			if c.ws != nil {
				c.ws.CloseNow()
			}
			c.gen++
			delete(s.conns, connID)
		}
		c = &conn{id: newID(), user: user, wake: make(chan struct{}, 1)}
		c.queue = []event{hello(c.id, user)}
		s.conns[c.id] = c
	}
	if challengeSeq > 0 {
		// websocket_router.go: HubRegister (the hello), then the reply.
		b, _ := json.Marshal(wsResponse{Status: "OK", SeqReply: challengeSeq})
		c.queue = append(c.queue, event{reply: b})
	}
	c.ws = ws
	c.gen++
	gen := c.gen
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	go s.write(ctx, c, ws, gen)
	// Read the client's requests until it goes (control frames are
	// answered by the library while reading); gatewayd sends none.
	s.actions(ctx, c, ws, op, auth)
	cancel()
	s.detach(c, gen)
}

func (s *Server) detach(c *conn, gen int) {
	s.mu.Lock()
	if c.gen == gen && c.ws != nil {
		c.ws.CloseNow()
		c.ws = nil
		c.gen++
	}
	c.signal()
	s.mu.Unlock()
}

// write is web_conn.go writePump: replayed events keep their seq; new
// ones get the next seq as they are written and enter the dead queue.
func (s *Server) write(ctx context.Context, c *conn, ws *websocket.Conn, gen int) {
	for {
		s.mu.Lock()
		if c.gen != gen {
			s.mu.Unlock()
			return
		}
		var e event
		switch {
		case len(c.replay) > 0:
			e, c.replay = c.replay[0], c.replay[1:]
		case len(c.queue) > 0 && c.queue[0].reply != nil:
			e, c.queue = c.queue[0], c.queue[1:]
		case len(c.queue) > 0:
			e, c.queue = c.queue[0], c.queue[1:]
			e.Seq = c.seq
			c.seq++
			c.dead = append(c.dead, e)
			if len(c.dead) > deadQueueSize {
				c.dead = c.dead[1:]
			}
		default:
			s.mu.Unlock()
			select {
			case <-c.wake:
			case <-ctx.Done():
				return
			}
			continue
		}
		stalled := s.stalled
		s.mu.Unlock()
		if stalled {
			continue // lost in flight (Stall)
		}
		b := e.reply
		if b == nil {
			b, _ = json.Marshal(e)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // writeWaitTime
		err := ws.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			s.detach(c, gen)
			return
		}
	}
}

// hello is web_conn.go createHelloMessage.
func hello(connID, user string) event {
	return event{Event: "hello", Data: map[string]any{"connection_id": connID, "server_version": "10.11.0.0.fake.false"},
		Broadcast: broadcast{UserID: user}}
}
