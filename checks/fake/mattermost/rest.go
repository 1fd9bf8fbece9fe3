package mattermost

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// routes is api4's InitPost, InitUser, InitChannel and InitWebSocket, the
// handlers the fake copies.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v4/users/me", s.api(s.getMe))
	mux.HandleFunc("POST /api/v4/posts", s.api(s.postCreate))
	mux.HandleFunc("GET /api/v4/posts/{id}", s.api(s.getPost))
	mux.HandleFunc("PUT /api/v4/posts/{id}/patch", s.api(s.patchPost))
	mux.HandleFunc("GET /api/v4/posts/{id}/thread", s.api(s.getThread))
	mux.HandleFunc("GET /api/v4/channels/{id}/posts", s.api(s.getChannelPosts))
	mux.HandleFunc("POST /api/v4/channels/direct", s.api(s.postDirect))
	mux.HandleFunc("POST /api/v4/users/{id}/typing", s.api(s.postTyping))
	// api4/file.go InitFile (files.go).
	mux.HandleFunc("POST /api/v4/files", s.api(s.uploadFile))
	mux.HandleFunc("GET /api/v4/files/{id}/info", s.getFileInfo)
	mux.HandleFunc("GET /api/v4/posts/{id}/files/info", s.getFileInfosForPost)
	mux.HandleFunc("GET /api/v4/files/{id}", s.getFile)
	// api4/websocket.go: a trailing slash is allowed.
	mux.HandleFunc("GET /api/v4/websocket", s.websocket)
	mux.HandleFunc("GET /api/v4/websocket/", s.websocket)
	return mux
}

type handler func(user string, r *http.Request) (status int, body any, err error)

// token is app/authentication.go ParseAuthTokenFromRequest: the
// MMAUTHTOKEN cookie, then "Bearer" (case-insensitive) or "Token" in
// Authorization, then ?access_token=.
func token(r *http.Request) string {
	if c, err := r.Cookie("MMAUTHTOKEN"); err == nil && c.Value != "" {
		return c.Value
	}
	h := r.Header.Get("Authorization")
	if len(h) > 6 && strings.EqualFold(h[:7], "bearer ") {
		return h[7:]
	}
	if strings.HasPrefix(strings.ToLower(h), "token ") {
		return h[6:]
	}
	return r.URL.Query().Get("access_token")
}

// auth returns the session's user, or "".
func (s *Server) auth(r *http.Request) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[token(r)]
}

func writeAppError(w http.ResponseWriter, e *appError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.StatusCode)
	json.NewEncoder(w).Encode(e)
}

// api wraps a handler with the rate limiter (app/ratelimit.go: 429, a
// plain-text body "limit exceeded" from http.Error, Retry-After in
// seconds) and session auth (web/handlers.go: 401
// api.context.session_expired.app_error).
func (s *Server) api(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, ok := s.gate(w, r)
		if !ok {
			return
		}
		status, body, err := h(user, r)
		var ae *appError
		if errors.As(err, &ae) {
			writeAppError(w, ae)
			return
		}
		if err != nil {
			writeAppError(w, newAppError(400, "api.context.invalid_body_param.app_error", err.Error()))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}
}

// gate is what every API handler does first (see [Server.api]): it
// records the request, applies Throttle and Fail, and authenticates; it
// returns false when it has answered the request itself.
func (s *Server) gate(w http.ResponseWriter, r *http.Request) (string, bool) {
	s.record(r)
	s.mu.Lock()
	limited := s.throttle > 0
	if limited {
		s.throttle--
	}
	failed := !limited && s.fail > 0
	if failed {
		s.fail--
	}
	failed = failed || !limited && s.failWhen != nil && s.failWhen(r.Method, r.URL.Path)
	s.mu.Unlock()
	if failed {
		writeAppError(w, newAppError(500, "app.post.get.app_error", "Unable to get the post."))
		return "", false
	}
	if limited {
		w.Header().Set("X-RateLimit-Limit", "10")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", "1")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "limit exceeded", http.StatusTooManyRequests)
		return "", false
	}
	user := s.auth(r)
	if user == "" {
		writeAppError(w, newAppError(401, "api.context.session_expired.app_error", "Invalid or expired session, please login again."))
		return "", false
	}
	return user, true
}

func readJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<22))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return newAppError(400, "api.context.invalid_body_param.app_error", "Invalid or missing body in request body.")
	}
	return nil
}

// getMe is api4/user.go getUser for "me": model.User's JSON
// (server/public/model/user.go) after SanitizeProfile, with the tags'
// omitempty honoured: is_bot and bot_description only for a bot,
// password, auth_data, mfa_secret, last_password_update,
// last_picture_update, failed_attempts, mfa_active, last_activity_at,
// terms_of_service_* absent when empty (fake: the account has none of
// them set, and no notify_props: reference silent on a bot's defaults).
func (s *Server) getMe(user string, _ *http.Request) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[user]
	out := map[string]any{"id": u.ID, "create_at": u.Created, "update_at": u.Created, "delete_at": 0,
		"username": u.Username, "auth_service": "", "email": u.Username + "@localhost", "nickname": "",
		"first_name": "", "last_name": "", "position": "", "roles": "system_user", "locale": "en",
		"timezone":              map[string]string{"automaticTimezone": "", "manualTimezone": "", "useAutomaticTimezone": "true"},
		"disable_welcome_email": false}
	if u.IsBot {
		out["is_bot"] = true
	}
	return 200, out, nil
}

// postCreate is api4/post.go createPost: 201 with the post.
func (s *Server) postCreate(user string, r *http.Request) (int, any, error) {
	var p Post
	if err := readJSON(r, &p); err != nil {
		return 0, nil, err
	}
	if p.ChannelID == "" {
		return 0, nil, newAppError(400, "api.context.invalid_body_param.app_error", "Invalid or missing channel_id in request body.")
	}
	p.Props = stripReserved(p.Props)
	s.mu.Lock()
	defer s.mu.Unlock()
	out, err := s.createPost(user, p)
	if err != nil {
		return 0, nil, err
	}
	return 201, snap(out), nil
}

// visible returns post id if user may read its channel (api4/post.go
// getPost: 403 without read_channel; 404 api.context.404.app_error when
// missing). Caller holds s.mu.
func (s *Server) visible(user, id string) (*Post, error) {
	p, ok := s.posts[id]
	if !ok {
		return nil, newAppError(404, "app.post.get.app_error", "Unable to get the post.")
	}
	if !s.channels[p.ChannelID].Members[user] {
		return nil, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	return p, nil
}

func (s *Server) getPost(user string, r *http.Request) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.visible(user, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return 200, snap(p), nil
}

// patchPost is api4/post.go patchPost with model.PostPatch: only fields
// present change; the author may edit (edit_own_posts); edit_at and
// update_at are set and post_edited is published (app/post.go).
func (s *Server) patchPost(user string, r *http.Request) (int, any, error) {
	var patch struct {
		Message *string        `json:"message"`
		Props   map[string]any `json:"props"`
	}
	if err := readJSON(r, &patch); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.visible(user, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	if p.UserID != user {
		return 0, nil, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	if patch.Message != nil {
		if utf8.RuneCountInString(*patch.Message) > MaxPostSize {
			return 0, nil, newAppError(400, "model.post.is_valid.message_length.app_error", "Invalid Message property length.")
		}
		p.Message = *patch.Message
	}
	if patch.Props != nil {
		p.Props = patch.Props
	}
	p.EditAt = s.now()
	p.UpdateAt = p.EditAt
	s.publishPost("post_edited", p, s.channels[p.ChannelID])
	return 200, snap(p), nil
}

// postList is model.PostList (server/public/model/post_list.go).
type postList struct {
	Order                     []string         `json:"order"`
	Posts                     map[string]*Post `json:"posts"`
	NextPostID                string           `json:"next_post_id"`
	PrevPostID                string           `json:"prev_post_id"`
	HasNext                   bool             `json:"has_next"`
	FirstInaccessiblePostTime int64            `json:"first_inaccessible_post_time"`
}

// list builds a PostList newest first, as the server orders channel posts
// (reference: the thread order is unverified; the fake uses newest first
// for both, so a client that relies on order breaks here too).
func list(ps []*Post) *postList {
	l := &postList{Order: []string{}, Posts: map[string]*Post{}}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].CreateAt > ps[j].CreateAt })
	for _, p := range ps {
		l.Order = append(l.Order, p.ID)
		l.Posts[p.ID] = p
	}
	return l
}

func (s *Server) getThread(user string, r *http.Request) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	root, err := s.visible(user, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	if root.RootID != "" {
		root = s.posts[root.RootID]
	}
	var ps []*Post
	for _, id := range s.order {
		if p := s.posts[id]; p.ID == root.ID || p.RootID == root.ID {
			ps = append(ps, p)
		}
	}
	return 200, snap(list(ps)), nil
}

// getChannelPosts is api4/post.go getPostsForChannel. A since that is
// not a number is 400 (SetInvalidParam); a since above 0 is
// store/sqlstore/post_store.go GetPostsSince (collapsed threads off):
// the channel's posts whose UpdateAt is after since, deleted ones
// included, plus (the query's UNION) the roots of those that are
// replies, at most 1000. Without since, or with since 0 or below, the
// server pages instead (GetPostsPage): the channel's posts that are not
// deleted, newest first, per_page of them (web/params.go: default 60,
// at most 200) from page (default 0) (see getChannelPage). before and
// after are not modelled and are refused here rather than ignored.
func (s *Server) getChannelPosts(user string, r *http.Request) (int, any, error) {
	q := r.URL.Query()
	var since int64
	if v := q.Get("since"); v != "" {
		var err error
		if since, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, nil, newAppError(400, "api.context.invalid_url_param.app_error", "Invalid or missing since parameter in request URL.")
		}
	}
	if q.Get("before") != "" || q.Get("after") != "" {
		return 0, nil, newAppError(501, "fake.not_modelled", "before and after are not modelled by the fake")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[r.PathValue("id")]
	if !ok || !ch.Members[user] {
		return 0, nil, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	if since <= 0 {
		return s.getChannelPage(ch, q)
	}
	var ps []*Post
	in := map[string]bool{}
	for _, id := range s.order {
		if p := s.posts[id]; p.ChannelID == ch.ID && p.UpdateAt > since && len(ps) < 1000 {
			ps = append(ps, p)
			in[p.ID] = true
		}
	}
	for _, p := range ps {
		if p.RootID != "" && !in[p.RootID] {
			ps = append(ps, s.posts[p.RootID])
			in[p.RootID] = true
		}
	}
	return 200, snap(list(ps)), nil
}

// postDirect is api4/channel.go createDirectChannel: exactly two ids, one
// of them the caller's; 201 with the channel, an existing one as is.
func (s *Server) postDirect(user string, r *http.Request) (int, any, error) {
	var ids []string
	if err := readJSON(r, &ids); err != nil {
		return 0, nil, err
	}
	if len(ids) != 2 {
		return 0, nil, newAppError(400, "api.context.invalid_body_param.app_error", "Invalid or missing user_ids in request body.")
	}
	if ids[0] != user && ids[1] != user {
		return 0, nil, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if _, ok := s.users[id]; !ok {
			return 0, nil, newAppError(400, "api.context.invalid_body_param.app_error", "Invalid or missing user_ids in request body.")
		}
	}
	c := s.direct(ids[0], ids[1])
	return 201, channelJSON(c), nil
}

// channelJSON is model.Channel's JSON (server/public/model/channel.go):
// every field without omitempty is sent; scheme_id, group_constrained,
// shared and policy_id are pointers, null when unset; a direct channel
// has no team and an empty display name (app/channel.go
// createDirectChannel).
func channelJSON(c *Channel) map[string]any {
	return map[string]any{"id": c.ID, "create_at": c.Created, "update_at": c.Created, "delete_at": 0,
		"team_id": "", "type": c.Type, "display_name": "", "name": c.Name, "header": "", "purpose": "",
		"last_post_at": 0, "total_msg_count": 0, "extra_update_at": 0, "creator_id": "", "scheme_id": nil,
		"props": nil, "group_constrained": nil, "shared": nil, "total_msg_count_root": 0, "policy_id": nil,
		"last_root_post_at": 0}
}

// postTyping is api4/user.go publishUserTyping: the path user must be
// the caller (or "me"), the caller needs create_post on the channel; the
// server broadcasts a typing event to the channel but the typer.
func (s *Server) postTyping(user string, r *http.Request) (int, any, error) {
	var tr struct {
		ChannelID string `json:"channel_id"`
		ParentID  string `json:"parent_id"`
	}
	if err := readJSON(r, &tr); err != nil {
		return 0, nil, err
	}
	if id := r.PathValue("id"); id != "me" && id != user {
		return 0, nil, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[tr.ChannelID]
	if !ok || !ch.Members[user] {
		return 0, nil, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	s.typing = append(s.typing, Typing{UserID: user, ChannelID: tr.ChannelID, ParentID: tr.ParentID})
	s.broadcast(ch, user, "typing", map[string]any{"parent_id": tr.ParentID, "user_id": user}, nil)
	return 200, map[string]string{"status": "OK"}, nil
}

// snap encodes v while the caller holds s.mu: posts change under the
// lock, so they may not be encoded after it is released.
func snap(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
