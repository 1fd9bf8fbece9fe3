// Package mattermost is a test double of a Mattermost server's REST API
// and WebSocket, used by gatewayd's tests and the stack tests that run
// gatewayd (checks/stack). It must never be linked into a role.
//
// # Invariant
//
// Every shape and behaviour copies Mattermost's server source
// (mattermost/mattermost; paths are under server/), and each carries a
// comment citing the file it copies; the notes taken from that reading are
// kept with the project's shared notes, not in this repository. Where the
// source is silent, the comment says "reference silent" and what was
// chosen.
//
// # What it models
//
//   - REST: users/me, create post (201; user_id from the session; from_bot
//     added for bots; the rune limit; root checks; file_ids attached only
//     when the author uploaded them and they are unattached), get post,
//     patch post, thread, channel posts since a time, direct channels,
//     typing; files: upload (simple and multipart), info, download
//     (files.go); errors as AppError JSON; 429 with a plain-text body and
//     Retry-After.
//   - Auth: the token from the MMAUTHTOKEN cookie, an Authorization
//     Bearer or Token header, or access_token (app/authentication.go).
//   - WebSocket: hello with a connection id (seq 0), posted events with
//     data.post and data.mentions as JSON strings (and otherFile and
//     image for a post with files), post_edited, typing;
//     per-connection seq; delivery only to channel members, the author
//     included; a disconnected connection keeps a send queue of 256 and a
//     dead queue of the last 128 sent events; a reconnect with
//     connection_id and sequence_number replays from the dead queue with
//     no hello, or, when events were lost, gets a new connection id and a
//     hello (platform/web_conn.go, platform/web_hub.go, api4/websocket.go).
//
// Tests drive it with [Server.AddUser], [Server.AddChannel],
// [Server.PostAs] (post as any user), [Server.Upload] (a file to attach
// to a post), [Server.StallFile] (a download cut off half-way), [Server.Drop] (kill WebSocket
// connections, optionally losing their queues) and [Server.Throttle].
package mattermost

import (
	"crypto/rand"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// MaxPostSize is the rune limit with the standard 65535-byte column
// (model.PostMessageMaxRunesV2, store/sqlstore/post_store.go
// determineMaxPostSize).
const MaxPostSize = 16383

// Post is model.Post's JSON (server/public/model/post.go), the fields the
// fake fills.
type Post struct {
	ID            string         `json:"id"`
	CreateAt      int64          `json:"create_at"`
	UpdateAt      int64          `json:"update_at"`
	EditAt        int64          `json:"edit_at"`
	DeleteAt      int64          `json:"delete_at"`
	IsPinned      bool           `json:"is_pinned"`
	UserID        string         `json:"user_id"`
	ChannelID     string         `json:"channel_id"`
	RootID        string         `json:"root_id"`
	OriginalID    string         `json:"original_id"`
	Message       string         `json:"message"`
	Type          string         `json:"type"`
	Props         map[string]any `json:"props"`
	Hashtags      string         `json:"hashtags"`
	FileIDs       []string       `json:"file_ids,omitempty"`
	PendingPostID string         `json:"pending_post_id"`
	HasReactions  bool           `json:"has_reactions,omitempty"`
	ReplyCount    int64          `json:"reply_count"`
	Metadata      map[string]any `json:"metadata"`
}

// User is the fake's account.
type User struct {
	ID       string
	Username string
	IsBot    bool
	Token    string
	Created  int64 // ms epoch
}

// Channel is the fake's channel.
type Channel struct {
	ID      string
	Type    string // O, P, D, G (model/channel.go)
	Name    string
	Members map[string]bool
	Created int64 // ms epoch
}

// Server is a fake Mattermost on an httptest server. Its methods are safe
// for concurrent use; it is closed by the test's Cleanup.
type Server struct {
	hs *httptest.Server

	mu       sync.Mutex // guards everything below
	users    map[string]*User
	tokens   map[string]string // token -> user id
	channels map[string]*Channel
	posts    map[string]*Post
	order    []string // post ids in creation order
	lastMS   int64
	conns    map[string]*conn // by connection id
	throttle int              // requests still to refuse with 429
	fail     int              // requests still to fail with 500
	failWhen func(method, path string) bool
	typing   []Typing
	requests []Request                // every request, in order (record.go)
	replays  int                      // reconnects that replayed at least one dead-queue event
	stalled  bool                     // frames are numbered but not carried (Stall), until Drop
	files    map[string]*storedFile   // uploaded files, by id (files.go)
	stalls   map[string]chan struct{} // downloads that stall half-way until closed (StallFile)
}

// Typing is one typing request the fake received.
type Typing struct{ UserID, ChannelID, ParentID string }

// New starts a fake server.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{users: map[string]*User{}, tokens: map[string]string{}, channels: map[string]*Channel{},
		posts: map[string]*Post{}, conns: map[string]*conn{}}
	s.hs = httptest.NewServer(s.routes())
	t.Cleanup(func() {
		s.Drop(true)
		s.hs.Close()
	})
	return s
}

// URL is the server's base URL (http://127.0.0.1:port).
func (s *Server) URL() string { return s.hs.URL }

// newID is model.NewId: 26 characters of lower-case base32 of 16 random
// bytes (server/public/model/utils.go, encoding "ybndrfg8ejkmcpqxot1uwisza345h769").
func newID() string {
	const alphabet = "ybndrfg8ejkmcpqxot1uwisza345h769"
	var b [16]byte
	rand.Read(b[:])
	var out strings.Builder
	var acc uint32
	bits := 0
	for _, c := range b {
		acc = acc<<8 | uint32(c)
		bits += 8
		for bits >= 5 {
			out.WriteByte(alphabet[(acc>>(bits-5))&31])
			bits -= 5
		}
	}
	out.WriteByte(alphabet[(acc<<(5-bits))&31])
	return out.String()
}

// now is a ms epoch, strictly increasing, so that create_at orders posts
// (reference silent on ties; the fake avoids them).
func (s *Server) now() int64 {
	ms := time.Now().UnixMilli()
	if ms <= s.lastMS {
		ms = s.lastMS + 1
	}
	s.lastMS = ms
	return ms
}

// AddUser creates a user (a bot if bot) and returns it with a token.
func (s *Server) AddUser(username string, bot bool) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &User{ID: newID(), Username: username, IsBot: bot, Token: newID(), Created: time.Now().UnixMilli()}
	s.users[u.ID] = u
	s.tokens[u.Token] = u.ID
	return *u
}

// AddChannel creates a channel of type typ (O, P or G) with members.
func (s *Server) AddChannel(typ, name string, members ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Channel{ID: newID(), Type: typ, Name: name, Members: map[string]bool{}, Created: time.Now().UnixMilli()}
	for _, m := range members {
		c.Members[m] = true
	}
	s.channels[c.ID] = c
	return c.ID
}

// Direct returns the direct channel of two users, creating it.
func (s *Server) Direct(a, b string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.direct(a, b).ID
}

// direct is app.GetOrCreateDirectChannel: the name is the two ids sorted
// and joined by "__" (model.GetDMNameFromIds).
func (s *Server) direct(a, b string) *Channel {
	ids := []string{a, b}
	slices.Sort(ids)
	name := ids[0] + "__" + ids[1]
	for _, c := range s.channels {
		if c.Type == "D" && c.Name == name {
			return c
		}
	}
	c := &Channel{ID: newID(), Type: "D", Name: name, Members: map[string]bool{a: true, b: true}, Created: time.Now().UnixMilli()}
	s.channels[c.ID] = c
	return c
}

// Throttle makes the next n API requests fail with 429.
func (s *Server) Throttle(n int) {
	s.mu.Lock()
	s.throttle = n
	s.mu.Unlock()
}

// Fail makes the next n API requests fail with 500 and an AppError
// body, as a server whose database is away answers (the store errors
// become model.AppError with status 500).
func (s *Server) Fail(n int) {
	s.mu.Lock()
	s.fail = n
	s.mu.Unlock()
}

// FailWhen makes every API request for which f returns true fail as
// [Server.Fail] does; nil stops it. f is called with the server's lock
// held and must not call the server.
func (s *Server) FailWhen(f func(method, path string) bool) {
	s.mu.Lock()
	s.failWhen = f
	s.mu.Unlock()
}

// PostAs creates p as user (p.UserID is overwritten), through the same
// path as the REST call: checks, from_bot, events. Type and Props are
// kept as given, so a test can send what a client could, except the
// props only an integration may set, which are removed (see
// [reservedProps]).
func (s *Server) PostAs(user string, p Post) (Post, error) {
	return s.post(user, p, false)
}

// PostAsWebhook creates p as an incoming webhook (or a plugin, or an
// OAuth app, by the props given) created by user would: the post's
// user_id is the webhook's creator, and props such as from_webhook,
// override_username and override_icon_url are kept
// (app/webhook.go CreateWebhookPost sets from_webhook="true" and the
// override_* props on a post whose UserId is the hook's creator).
func (s *Server) PostAsWebhook(user string, p Post) (Post, error) {
	return s.post(user, p, true)
}

// reservedProps are the props an ordinary client may not set
// (model.ContainsIntegrationsReservedProps in server/public/model/post.go:
// from_webhook, override_username, webhook_display_name,
// override_icon_url, override_icon_emoji, mm_blocks_actions). The fake
// strips them from a client's post, so a client cannot pass for a
// webhook. [I]: the server refuses them on edits
// (can_not_update_post_props); that it drops them on create is
// inferred, and either way a client's post never carries them.
var reservedProps = []string{"from_webhook", "override_username", "webhook_display_name", "override_icon_url", "override_icon_emoji", "mm_blocks_actions"}

func (s *Server) post(user string, p Post, integration bool) (Post, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !integration {
		p.Props = stripReserved(p.Props)
	}
	out, err := s.createPost(user, p)
	if err != nil {
		return Post{}, err
	}
	return *out, nil
}

// stripReserved returns props without [reservedProps].
func stripReserved(props map[string]any) map[string]any {
	if props == nil {
		return nil
	}
	out := make(map[string]any, len(props))
	for k, v := range props {
		if !slices.Contains(reservedProps, k) {
			out[k] = v
		}
	}
	return out
}

// Posts returns a copy of every post in a channel, oldest first.
func (s *Server) Posts(channel string) []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Post
	for _, id := range s.order {
		if p := s.posts[id]; p.ChannelID == channel {
			out = append(out, clonePost(p))
		}
	}
	return out
}

// Thread returns a copy of a thread's posts, root first.
func (s *Server) Thread(root string) []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Post
	for _, id := range s.order {
		if p := s.posts[id]; p.ID == root || p.RootID == root {
			out = append(out, clonePost(p))
		}
	}
	return out
}

// Typings returns the typing requests received so far.
func (s *Server) Typings() []Typing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.typing)
}

func clonePost(p *Post) Post {
	b, _ := json.Marshal(p)
	var c Post
	json.Unmarshal(b, &c)
	return c
}

// appError is model.AppError's JSON (server/public/model/utils.go).
type appError struct {
	ID            string `json:"id"`
	Message       string `json:"message"`
	DetailedError string `json:"detailed_error"`
	RequestID     string `json:"request_id"`
	StatusCode    int    `json:"status_code"`
}

func (e *appError) Error() string { return e.ID }

func newAppError(status int, id, msg string) *appError {
	return &appError{ID: id, Message: msg, StatusCode: status, RequestID: newID()}
}

// createPost is api4/post.go createPost and app/post.go CreatePost: the
// author is the session's user, SanitizeInput clears delete_at and
// metadata, create_at is the server's (the caller has no manage_system),
// a bot author gets props.from_bot, the message is checked in runes, and
// the root must be a root post of the same channel. Caller holds s.mu.
func (s *Server) createPost(user string, p Post) (*Post, error) {
	ch, ok := s.channels[p.ChannelID]
	if !ok || !ch.Members[user] {
		return nil, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	if n := utf8.RuneCountInString(p.Message); n > MaxPostSize {
		return nil, newAppError(400, "model.post.is_valid.message_length.app_error", "Invalid Message property length.")
	}
	if p.RootID != "" {
		root, ok := s.posts[p.RootID]
		if !ok || root.RootID != "" || root.ChannelID != p.ChannelID {
			return nil, newAppError(400, "api.post.create_post.root_id.app_error", "Invalid RootId parameter.")
		}
	}
	p.ID, p.UserID, p.DeleteAt, p.EditAt = newID(), user, 0, 0
	p.CreateAt = s.now()
	p.UpdateAt = p.CreateAt
	p.Metadata = map[string]any{}
	if p.Props == nil {
		p.Props = map[string]any{}
	}
	if s.users[user].IsBot {
		p.Props["from_bot"] = "true"
	}
	s.attachFiles(&p)
	s.posts[p.ID] = &p
	s.order = append(s.order, p.ID)
	if p.RootID != "" {
		s.posts[p.RootID].ReplyCount++
	}
	s.publishPost("posted", &p, ch)
	return &p, nil
}

// Patch sets a post's message directly (a test's edit, no event).
func (s *Server) Patch(id, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.posts[id]; ok {
		p.Message = message
	}
}
