// Package mattermost is gatewayd's Mattermost client, directly over HTTP
// and WebSocket: REST calls with the bot token as a Bearer header, and an
// event stream that reconnects with connection_id and sequence_number and
// reports when events were lost, so the caller can fetch the gap.
//
// Invariants:
//   - everything the server sends is untrusted: bodies are size-capped
//     before they are read, ids are checked against [gatewayd.IDPattern] before
//     they are used, and a post whose fields do not parse is dropped, not
//     half-read (the server's model grows fields, so unknown ones are
//     ignored here, unlike on Boxmaker's own sockets);
//   - the token is a [secret.Value]: it is revealed only into the
//     Authorization header and never reaches a log or an error;
//   - a message is never cut: [Split] breaks long text on rune boundaries
//     into posts within the server's limit.
//
// Wire facts are from Mattermost's server source, mattermost/mattermost:
// the bearer token as ParseAuthTokenFromRequest reads it
// (server/channels/app/authentication.go), the reconnection's
// connection_id and sequence_number query parameters
// (server/channels/api4/websocket.go:19-20 at commit 04e85894, read in
// connectWebSocket), and each type and call below cites the upstream
// file it copies (server/public/model/, server/channels/api4/).
package mattermost

import (
	"encoding/json"
	"errors"
	"fmt"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
)

// Post is the part of model.Post (server/public/model/post.go) gatewayd
// reads.
type Post struct {
	ID        string         `json:"id"`
	CreateAt  int64          `json:"create_at"`
	UpdateAt  int64          `json:"update_at"`
	EditAt    int64          `json:"edit_at"`
	DeleteAt  int64          `json:"delete_at"`
	UserID    string         `json:"user_id"`
	ChannelID string         `json:"channel_id"`
	RootID    string         `json:"root_id"`
	Message   string         `json:"message"`
	Type      string         `json:"type"`
	Props     map[string]any `json:"props"`
	FileIDs   []string       `json:"file_ids"`
}

// MaxPostJSON caps one post's JSON: a message of MaxRunes runes of up to
// 4 bytes, escaped, plus props (the server caps props at 800,000 runes).
const MaxPostJSON = 4 << 20

// ParsePost decodes one post (as the server's Post.ToJSON writes it) and
// checks the ids gatewayd will use.
func ParsePost(b []byte) (*Post, error) {
	if len(b) > MaxPostJSON {
		return nil, fmt.Errorf("parse post: %d bytes, over %d", len(b), MaxPostJSON)
	}
	var p Post
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("parse post: %v", err)
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Post) check() error {
	if !gatewayd.ValidID(p.ID) || !gatewayd.ValidID(p.UserID) || !gatewayd.ValidID(p.ChannelID) || (p.RootID != "" && !gatewayd.ValidID(p.RootID)) {
		return errors.New("parse post: an id is not a Mattermost id")
	}
	if p.CreateAt < 0 {
		return errors.New("parse post: negative create_at")
	}
	return nil
}

// Thread is the post's thread root: its root_id, or itself for a root.
func (p *Post) Thread() string {
	if p.RootID != "" {
		return p.RootID
	}
	return p.ID
}

// PostList is model.PostList (server/public/model/post_list.go).
type PostList struct {
	Order []string         `json:"order"`
	Posts map[string]*Post `json:"posts"`
}

// checked returns the list's posts whose ids check, keyed as sent; a
// post filed under a key that is not its own id is dropped.
func (l *PostList) checked() []*Post {
	var out []*Post
	for k, p := range l.Posts {
		if p == nil || p.ID != k || p.check() != nil {
			continue
		}
		out = append(out, p)
	}
	return out
}

// User is the part of model.User gatewayd reads.
type User struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	IsBot    bool   `json:"is_bot"`
}

// Channel is the part of model.Channel gatewayd reads.
type Channel struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Channel types (model/channel.go).
const (
	ChannelOpen    = "O"
	ChannelPrivate = "P"
	ChannelDirect  = "D"
	ChannelGroup   = "G"
)

// Event is one WebSocket event (model.WebSocketEvent's JSON).
type Event struct {
	Event     string          `json:"event"`
	Data      json.RawMessage `json:"data"`
	Broadcast json.RawMessage `json:"broadcast"`
	Seq       int64           `json:"seq"`

	// A response to a request has these and no event.
	Status   string `json:"status"`
	SeqReply int64  `json:"seq_reply"`
}

// MaxEventJSON caps one WebSocket frame.
const MaxEventJSON = 2 * MaxPostJSON

// ParseEvent decodes one WebSocket text frame.
func ParseEvent(b []byte) (*Event, error) {
	if len(b) > MaxEventJSON {
		return nil, fmt.Errorf("parse event: %d bytes, over %d", len(b), MaxEventJSON)
	}
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("parse event: %v", err)
	}
	if e.Seq < 0 {
		return nil, errors.New("parse event: negative seq")
	}
	return &e, nil
}

// Hello is a hello event's data (web_conn.go createHelloMessage).
type Hello struct {
	ConnectionID  string `json:"connection_id"`
	ServerVersion string `json:"server_version"`
}

// ParseHello reads a hello event's data.
func ParseHello(e *Event) (*Hello, error) {
	var h Hello
	if err := json.Unmarshal(e.Data, &h); err != nil {
		return nil, fmt.Errorf("parse hello: %v", err)
	}
	if h.ConnectionID == "" || len(h.ConnectionID) > 64 {
		return nil, errors.New("parse hello: bad connection_id")
	}
	return &h, nil
}

// Posted is a posted or post_edited event's data: data.post and
// data.mentions are JSON strings, decoded a second time
// (app/notification.go, app/web_broadcast_hooks.go).
type Posted struct {
	Post        *Post
	ChannelType string
	Mentions    []string // present only when the receiving user is mentioned
}

// ParsePosted reads a posted or post_edited event's data.
func ParsePosted(e *Event) (*Posted, error) {
	var d struct {
		Post        string `json:"post"`
		ChannelType string `json:"channel_type"`
		Mentions    string `json:"mentions"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return nil, fmt.Errorf("parse %s: %v", e.Event, err)
	}
	p, err := ParsePost([]byte(d.Post))
	if err != nil {
		return nil, err
	}
	out := &Posted{Post: p, ChannelType: d.ChannelType}
	switch d.ChannelType {
	case ChannelOpen, ChannelPrivate, ChannelDirect, ChannelGroup:
	default:
		return nil, fmt.Errorf("parse %s: unknown channel_type %q", e.Event, d.ChannelType)
	}
	if d.Mentions != "" {
		if err := json.Unmarshal([]byte(d.Mentions), &out.Mentions); err != nil {
			return nil, fmt.Errorf("parse %s: mentions: %v", e.Event, err)
		}
	}
	return out, nil
}
