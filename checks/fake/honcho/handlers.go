package honcho

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The answers' shapes: FastAPI serialises response_model by alias, in
// the schema's field order (src/schemas/api.py Workspace line 165, Peer
// line 235, Session line 458, Message line 375).
type (
	workspaceOut struct {
		ID            string          `json:"id"`
		Metadata      json.RawMessage `json:"metadata"`
		Configuration json.RawMessage `json:"configuration"`
		CreatedAt     string          `json:"created_at"`
	}
	peerOut struct {
		ID            string          `json:"id"`
		WorkspaceID   string          `json:"workspace_id"`
		CreatedAt     string          `json:"created_at"`
		Metadata      json.RawMessage `json:"metadata"`
		Configuration json.RawMessage `json:"configuration"`
	}
	sessionOut struct {
		ID            string          `json:"id"`
		IsActive      bool            `json:"is_active"`
		WorkspaceID   string          `json:"workspace_id"`
		Metadata      json.RawMessage `json:"metadata"`
		Configuration json.RawMessage `json:"configuration"`
		CreatedAt     string          `json:"created_at"`
	}
	messageOut struct {
		ID          string          `json:"id"`
		Content     string          `json:"content"`
		PeerID      string          `json:"peer_id"`
		SessionID   string          `json:"session_id"`
		Metadata    json.RawMessage `json:"metadata"`
		CreatedAt   string          `json:"created_at"`
		WorkspaceID string          `json:"workspace_id"`
		TokenCount  int             `json:"token_count"`
	}
)

var empty = json.RawMessage("{}")

// ensureWorkspace is crud/workspace.py get_or_create_workspace; peers and
// sessions call it too (crud/peer.py line 280, crud/session.py line 257).
// Callers hold s.mu.
func (s *Server) ensureWorkspace(name string) (*workspace, bool) {
	if ws, ok := s.workspaces[name]; ok {
		return ws, false
	}
	ws := &workspace{created: s.opts.Now(), peers: map[string]time.Time{}, sessions: map[string]*session{}}
	s.workspaces[name] = ws
	return ws, true
}

func (s *Server) ensurePeer(ws *workspace, name string) (time.Time, bool) {
	if t, ok := ws.peers[name]; ok {
		return t, false
	}
	t := s.opts.Now()
	ws.peers[name] = t
	return t, true
}

// src/routers/workspaces.py get_or_create_workspace (line 27): 201 when
// created, 200 when it existed (line 57).
func (s *Server) getOrCreateWorkspace(w http.ResponseWriter, _ *http.Request, b []byte) {
	m, ok := parseBody(w, b)
	if !ok {
		return
	}
	var errs []verr
	name := m.id(&errs)
	if len(errs) > 0 {
		invalid(w, errs)
		return
	}
	s.mu.Lock()
	ws, created := s.ensureWorkspace(name)
	out := workspaceOut{name, empty, empty, stamp(ws.created)}
	s.mu.Unlock()
	writeJSON(w, createdStatus(created), out)
}

func createdStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// wsPath checks a path's workspace id. Path parameters carry no pattern
// (Path(...)); fake: the crud layer's WorkspaceCreate(name=...) would
// refuse a non-conforming one, answered here as a 422 detail string.
func wsPath(w http.ResponseWriter, r *http.Request, keys ...string) ([]string, bool) {
	var out []string
	for _, k := range keys {
		v := r.PathValue(k)
		if !validPeerName(v) {
			detail(w, http.StatusUnprocessableEntity, fmt.Sprintf("Invalid name %q: must match %s and be 1 to %d characters", v, idPattern, maxIDLen))
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// src/routers/peers.py get_or_create_peer (line 156; status line 194).
func (s *Server) getOrCreatePeer(w http.ResponseWriter, r *http.Request, b []byte) {
	p, ok := wsPath(w, r, "w")
	if !ok {
		return
	}
	m, ok := parseBody(w, b)
	if !ok {
		return
	}
	var errs []verr
	name := m.id(&errs)
	if len(errs) > 0 {
		invalid(w, errs)
		return
	}
	s.mu.Lock()
	ws, _ := s.ensureWorkspace(p[0])
	t, created := s.ensurePeer(ws, name)
	s.mu.Unlock()
	writeJSON(w, createdStatus(created), peerOut{name, p[0], stamp(t), empty, empty})
}

// peerConfigs reads a map of peer -> SessionPeerConfig (observe_me,
// observe_others: bool | None; src/schemas/configuration.py lines 211-224).
func peerConfigs(w http.ResponseWriter, r json.RawMessage, loc []any) (map[string]json.RawMessage, int, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(r, &m) != nil || m == nil {
		invalid(w, []verr{{Type: "dict_type", Loc: loc, Msg: "Input should be a valid dictionary", Input: raw(r)}})
		return nil, 0, false
	}
	observers := 0
	for name, cfg := range m {
		if !validPeerName(name) {
			detail(w, http.StatusUnprocessableEntity, fmt.Sprintf("Invalid peer name %q: must match %s", name, idPattern))
			return nil, 0, false
		}
		var c map[string]json.RawMessage
		if json.Unmarshal(cfg, &c) != nil || c == nil {
			invalid(w, []verr{{Type: "model_attributes_type", Loc: append(loc, name), Msg: "Input should be a valid dictionary or object to extract fields from", Input: raw(cfg)}})
			return nil, 0, false
		}
		for _, k := range []string{"observe_me", "observe_others"} {
			v, ok := c[k]
			if !ok || string(v) == "null" {
				continue
			}
			var bv bool
			if json.Unmarshal(v, &bv) != nil {
				invalid(w, []verr{{Type: "bool_type", Loc: append(loc, name, k), Msg: "Input should be a valid boolean", Input: raw(v)}})
				return nil, 0, false
			}
			if k == "observe_others" && bv {
				observers++
			}
		}
	}
	return m, observers, true
}

// getOrCreateSession is src/routers/sessions.py get_or_create_session
// (line 289; status line 345) over crud/session.py get_or_create_session:
// "peers" (alias of peer_names) adds peers; a new session with more than
// SESSION_OBSERVERS_LIMIT observers is ObserverException, 400.
func (s *Server) getOrCreateSession(w http.ResponseWriter, r *http.Request, b []byte) {
	p, ok := wsPath(w, r, "w")
	if !ok {
		return
	}
	m, ok := parseBody(w, b)
	if !ok {
		return
	}
	var errs []verr
	name := m.id(&errs)
	if len(errs) > 0 {
		invalid(w, errs)
		return
	}
	var peers map[string]json.RawMessage
	observers := 0
	if pr, ok := m["peers"]; ok && string(pr) != "null" {
		if peers, observers, ok = peerConfigs(w, pr, []any{"body", "peers"}); !ok {
			return
		}
	}
	s.serveSession(w, p[0], name, peers, observers, true)
}

// addPeers is src/routers/sessions.py add_peers_to_session (line 462):
// the body is the map itself, and the answer is 200 with the session.
func (s *Server) addPeers(w http.ResponseWriter, r *http.Request, b []byte) {
	p, ok := wsPath(w, r, "w", "s")
	if !ok {
		return
	}
	if _, ok := parseBody(w, b); !ok {
		return
	}
	peers, observers, ok := peerConfigs(w, b, []any{"body"})
	if !ok {
		return
	}
	s.serveSession(w, p[0], p[1], peers, observers, false)
}

func (s *Server) serveSession(w http.ResponseWriter, wsName, name string, peers map[string]json.RawMessage, observers int, createStatus bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.workspaces[wsName]
	var sess *session
	if ws != nil {
		sess = ws.sessions[name]
	}
	created := false
	if sess != nil && sess.inactive {
		notFound(w, wsName, name)
		return
	}
	if sess == nil {
		if observers > maxObservers {
			// src/exceptions.py ObserverException (line 32).
			detail(w, http.StatusBadRequest, fmt.Sprintf("Cannot create session %s with %d observers. Maximum allowed is %d observers per session. Observers are peers with 'observe_others' set to true.", name, observers, maxObservers))
			return
		}
		ws, _ = s.ensureWorkspace(wsName)
		sess = &session{created: s.opts.Now(), peers: map[string]json.RawMessage{}}
		ws.sessions[name] = sess
		created = true
	}
	for peer, cfg := range peers {
		s.ensurePeer(ws, peer)
		sess.peers[peer] = cfg
	}
	status := http.StatusOK
	if createStatus {
		status = createdStatus(created)
	}
	writeJSON(w, status, sessionOut{name, true, wsName, empty, empty, stamp(sess.created)})
}

func tokens(content string) int { return (chars(content) + 3) / 4 }

func (s *Server) out(m *message) messageOut {
	return messageOut{m.ID, m.Content, m.Peer, m.Session, m.Metadata, stamp(m.Created), m.Workspace, m.Tokens}
}

// createMessages is src/routers/messages.py create_messages_for_session
// (line 95, status_code=201) over crud/message.py create_messages, which
// get-or-creates the session with the authors as peers (line 334); the
// answer is the created messages, in order. MessageBatchCreate holds 1 to
// 100 messages (src/schemas/api.py line 395); each MessageCreate has
// content (at most MAX_MESSAGE_SIZE characters, NULs stripped by
// sanitize_content, line 341), peer_id, and optional metadata and
// created_at.
func (s *Server) createMessages(w http.ResponseWriter, r *http.Request, b []byte) {
	p, ok := wsPath(w, r, "w", "s")
	if !ok {
		return
	}
	m, ok := parseBody(w, b)
	if !ok {
		return
	}
	var errs []verr
	rm, ok := m["messages"]
	if !ok {
		invalid(w, []verr{{Type: "missing", Loc: []any{"body", "messages"}, Msg: "Field required", Input: m.input()}})
		return
	}
	var list []json.RawMessage
	if json.Unmarshal(rm, &list) != nil || list == nil {
		invalid(w, []verr{{Type: "list_type", Loc: []any{"body", "messages"}, Msg: "Input should be a valid list", Input: raw(rm)}})
		return
	}
	if n := len(list); n < 1 || n > maxBatch {
		typ, msg, ctx := "too_short", "List should have at least 1 item after validation, not 0", map[string]any{"field_type": "List", "min_length": 1, "actual_length": n}
		if n > maxBatch {
			typ, msg, ctx = "too_long", fmt.Sprintf("List should have at most %d items after validation, not %d", maxBatch, n), map[string]any{"field_type": "List", "max_length": maxBatch, "actual_length": n}
		}
		invalid(w, []verr{{Type: typ, Loc: []any{"body", "messages"}, Msg: msg, Input: raw(rm), Ctx: ctx}})
		return
	}
	type in struct {
		content, peer string
		metadata      json.RawMessage
		created       string
	}
	var ins []in
	for i, item := range list {
		var im body
		loc := []any{"body", "messages", i}
		if json.Unmarshal(item, &im) != nil || im == nil {
			errs = append(errs, verr{Type: "model_attributes_type", Loc: loc, Msg: "Input should be a valid dictionary or object to extract fields from", Input: raw(item)})
			continue
		}
		content, cok := im.str(&errs, []any{"body", "messages", i}, "content", true)
		if cok {
			lengths(&errs, []any{"body", "messages", i, "content"}, content, 0, maxContent)
		}
		peer, _ := im.str(&errs, []any{"body", "messages", i}, "peer_id", true)
		md := empty
		if v, ok := im["metadata"]; ok && string(v) != "null" {
			var o map[string]json.RawMessage
			if json.Unmarshal(v, &o) != nil || o == nil {
				errs = append(errs, verr{Type: "dict_type", Loc: []any{"body", "messages", i, "metadata"}, Msg: "Input should be a valid dictionary", Input: raw(v)})
			}
			md = v
		}
		created, _ := im.str(&errs, []any{"body", "messages", i}, "created_at", false)
		ins = append(ins, in{strings.ReplaceAll(content, "\x00", ""), peer, md, created})
	}
	if len(errs) > 0 {
		invalid(w, errs)
		return
	}
	for _, x := range ins {
		if !validPeerName(x.peer) {
			detail(w, http.StatusUnprocessableEntity, fmt.Sprintf("Invalid peer name %q: must match %s", x.peer, idPattern))
			return
		}
	}
	s.mu.Lock()
	ws, _ := s.ensureWorkspace(p[0])
	sess := ws.sessions[p[1]]
	if sess != nil && sess.inactive {
		s.mu.Unlock()
		notFound(w, p[0], p[1])
		return
	}
	if sess == nil {
		sess = &session{created: s.opts.Now(), peers: map[string]json.RawMessage{}}
		ws.sessions[p[1]] = sess
	}
	outs := make([]messageOut, 0, len(ins))
	for _, x := range ins {
		s.ensurePeer(ws, x.peer)
		if _, ok := sess.peers[x.peer]; !ok {
			sess.peers[x.peer] = empty
		}
		s.nextID++
		msg := &message{ID: fmt.Sprintf("fakemsg%014d", s.nextID), Content: x.content, Peer: x.peer, Session: p[1],
			Workspace: p[0], Metadata: x.metadata, Created: s.opts.Now(), Tokens: tokens(x.content)}
		if t, err := time.Parse(time.RFC3339Nano, x.created); err == nil {
			msg.Created = t
		}
		s.messages = append(s.messages, msg)
		outs = append(outs, s.out(msg))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, outs)
}

// listMessages is src/routers/messages.py get_messages ("/list", line
// 306): a fastapi-pagination Page (items, total, page, size, pages) with
// ?page= (from 1) and ?size= (1 to 100, default 50) and ?reverse=.
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, _ []byte) {
	p, ok := wsPath(w, r, "w", "s")
	if !ok {
		return
	}
	var errs []verr
	page := queryInt(&errs, r, "page", 1, 1, 1<<31-1)
	size := queryInt(&errs, r, "size", defPageSize, 1, maxPageSize)
	if len(errs) > 0 {
		invalid(w, errs)
		return
	}
	s.mu.Lock()
	var all []messageOut
	for _, m := range s.messages {
		if m.Workspace == p[0] && m.Session == p[1] {
			all = append(all, s.out(m))
		}
	}
	s.mu.Unlock()
	if r.URL.Query().Get("reverse") == "true" {
		for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
			all[i], all[j] = all[j], all[i]
		}
	}
	items := []messageOut{}
	if lo := (page - 1) * size; lo < len(all) {
		items = all[lo:min(lo+size, len(all))]
	}
	writeJSON(w, http.StatusOK, struct {
		Items []messageOut `json:"items"`
		Total int          `json:"total"`
		Page  int          `json:"page"`
		Size  int          `json:"size"`
		Pages int          `json:"pages"`
	}{items, len(all), page, size, (len(all) + size - 1) / size})
}

func queryInt(errs *[]verr, r *http.Request, key string, def, ge, le int) int {
	v := r.URL.Query().Get(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		*errs = append(*errs, verr{Type: "int_parsing", Loc: []any{"query", key}, Msg: "Input should be a valid integer, unable to parse string as an integer", Input: v})
		return def
	}
	return bounded(errs, []any{"query", key}, n, ge, le)
}
