package mattermost

import (
	"context"
	"encoding/json"
	"time"

	"github.com/coder/websocket"
)

// authCheckInterval is how long an unauthenticated WebSocket may stay
// open (platform/web_conn.go authCheckInterval, 5 s).
const authCheckInterval = 5 * time.Second

// wsRequest is model.WebSocketRequest's JSON (model/websocket_request.go).
type wsRequest struct {
	Seq    int64           `json:"seq"`
	Action string          `json:"action"`
	Data   json.RawMessage `json:"data"`
}

// wsResponse is model.WebSocketResponse's JSON
// (model/websocket_message.go): no event, no seq of the stream.
type wsResponse struct {
	Status   string         `json:"status"`
	SeqReply int64          `json:"seq_reply,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
	Error    *appError      `json:"error,omitempty"`
}

func readRequest(ctx context.Context, ws *websocket.Conn) (*wsRequest, []byte, error) {
	_, b, err := ws.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	var r wsRequest
	if json.Unmarshal(b, &r) != nil {
		return &wsRequest{}, b, nil
	}
	return &r, b, nil
}

// challenge is the path of a WebSocket upgraded without a session
// (api4/websocket.go connectWebSocket registers it only with a session):
// app/platform/websocket_router.go ServeWebSocket answers a request
// with no action (api.web_socket_router.no_action.app_error) or a seq
// not above 0 (bad_seq) with an error, any other action but
// authentication_challenge with not_authenticated (401), and closes the
// socket on a challenge whose data.token is not a string or names no
// session; web_conn.go closes a socket still unauthenticated after
// authCheckInterval. On success it returns the user and the challenge's
// seq, for the reply that follows the hello.
func (s *Server) challenge(ws *websocket.Conn, op string) (string, int64) {
	ctx, cancel := context.WithTimeout(context.Background(), authCheckInterval)
	defer cancel()
	for {
		req, _, err := readRequest(ctx, ws)
		if err != nil {
			ws.CloseNow()
			return "", 0
		}
		s.recordAction(op, "", req)
		switch {
		case req.Action == "":
			writeNow(ws, wsError(req.Seq, 400, "api.web_socket_router.no_action.app_error"))
		case req.Seq <= 0:
			writeNow(ws, wsError(req.Seq, 400, "api.web_socket_router.bad_seq.app_error"))
		case req.Action != "authentication_challenge":
			writeNow(ws, wsError(req.Seq, 401, "api.web_socket_router.not_authenticated.app_error"))
		default:
			var d struct {
				Token *string `json:"token"`
			}
			json.Unmarshal(req.Data, &d)
			s.mu.Lock()
			user := ""
			if d.Token != nil {
				user = s.tokens[*d.Token]
			}
			s.mu.Unlock()
			if user == "" {
				ws.CloseNow()
				return "", 0
			}
			return user, req.Seq
		}
	}
}

func wsError(seq int64, status int, id string) wsResponse {
	e := newAppError(status, id, id)
	return wsResponse{Status: "FAIL", SeqReply: seq, Error: e}
}

// writeNow writes before the connection is registered (no writer yet).
func writeNow(ws *websocket.Conn, v any) {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws.Write(ctx, websocket.MessageText, b)
}

func (s *Server) recordAction(op, auth string, req *wsRequest) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{Op: op, Method: "WS", Path: req.Action, Body: append([]byte(nil), req.Data...), Auth: auth})
	s.mu.Unlock()
}

// reply queues a response behind the events already queued (the hub's
// SendMessage puts it on the same send queue).
func (s *Server) reply(c *conn, r wsResponse) {
	b, _ := json.Marshal(r)
	s.mu.Lock()
	c.queue = append(c.queue, event{reply: b})
	c.signal()
	s.mu.Unlock()
}

// actions reads an authenticated connection's requests until it goes:
// ServeWebSocket's checks, then the handlers gatewayd's peers use:
// ping (wsapi/system.go: text "pong", version, server_time, node_id)
// and user_typing (wsapi/user.go userTyping: data.channel_id must be an
// id of a channel the user may post in, else
// api.websocket_handler.invalid_param.app_error; parent_id optional;
// App.PublishUserTyping broadcasts typing to the channel but the
// typer; the answer is OK with no data). A second challenge is ignored
// (the connection has a token). Any other action is bad_action (500).
func (s *Server) actions(ctx context.Context, c *conn, ws *websocket.Conn, op, auth string) {
	for {
		req, _, err := readRequest(ctx, ws)
		if err != nil {
			return
		}
		s.recordAction(op, auth, req)
		switch {
		case req.Action == "":
			s.reply(c, wsError(req.Seq, 400, "api.web_socket_router.no_action.app_error"))
		case req.Seq <= 0:
			s.reply(c, wsError(req.Seq, 400, "api.web_socket_router.bad_seq.app_error"))
		case req.Action == "authentication_challenge":
		case req.Action == "ping":
			s.reply(c, wsResponse{Status: "OK", SeqReply: req.Seq, Data: map[string]any{
				"text": "pong", "version": "10.11.0", "server_time": time.Now().UnixMilli(), "node_id": ""}})
		case req.Action == "user_typing":
			var d struct {
				ChannelID any `json:"channel_id"`
				ParentID  any `json:"parent_id"`
			}
			json.Unmarshal(req.Data, &d)
			ch, _ := d.ChannelID.(string)
			parent, _ := d.ParentID.(string)
			s.mu.Lock()
			channel, ok := s.channels[ch]
			ok = ok && channel.Members[c.user]
			if ok {
				s.typing = append(s.typing, Typing{UserID: c.user, ChannelID: ch, ParentID: parent})
				s.broadcast(channel, c.user, "typing", map[string]any{"parent_id": parent, "user_id": c.user}, nil)
			}
			s.mu.Unlock()
			if !ok {
				s.reply(c, wsError(req.Seq, 400, "api.websocket_handler.invalid_param.app_error"))
				continue
			}
			s.reply(c, wsResponse{Status: "OK", SeqReply: req.Seq})
		default:
			s.reply(c, wsError(req.Seq, 500, "api.web_socket_router.bad_action.app_error"))
		}
	}
}
