package honcho

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
)

// Limits from Honcho's schemas (src/schemas/api.py) and settings
// (src/config.py), checked here before anything is sent.
const (
	MaxBatch    = 100    // MessageBatchCreate.messages: max_length=100
	MaxContent  = 25_000 // MessageCreate.content: max_length=settings.MAX_MESSAGE_SIZE (default 25 000), in characters
	MaxLimit    = 100    // MessageSearchOptions.limit: le=100
	MaxQuery    = 10_000 // DialecticOptions.query: max_length=10000
	MaxMetadata = 16     // ours: our metadata is ids, a few keys at most
)

// ErrRefused wraps a request this client will not send: Honcho would
// refuse it, or store something other than what was asked.
var ErrRefused = errors.New("honcho: request refused before sending")

func refuse(op, format string, a ...any) error {
	return fmt.Errorf("%s: %w: %s", op, ErrRefused, fmt.Sprintf(format, a...))
}

type idBody struct {
	ID honchoconf.ID `json:"id"`
}

func ws(w honchoconf.ID, rest ...string) []string {
	return append([]string{"v3", "workspaces", w.String()}, rest...)
}

func need(op string, ids ...honchoconf.ID) error {
	for _, id := range ids {
		if id.IsZero() {
			return refuse(op, "an id is empty")
		}
	}
	return nil
}

// Workspace gets or creates a workspace (POST /v3/workspaces: 201 when
// created, 200 when it existed; src/routers/workspaces.py).
func (c *Client) Workspace(ctx context.Context, id honchoconf.ID) (Workspace, error) {
	const op = "get or create honcho workspace"
	if err := need(op, id); err != nil {
		return Workspace{}, err
	}
	st, b, err := c.do(ctx, op, http.MethodPost, []string{"v3", "workspaces"}, idBody{id}, http.StatusOK, http.StatusCreated)
	if err != nil {
		return Workspace{}, err
	}
	w, err := DecodeWorkspace(b)
	if err == nil && w.ID != id {
		err = undecodable("workspace", fmt.Errorf("id %q, asked for %q", w.ID, id))
	}
	if err != nil {
		return Workspace{}, fmt.Errorf("%s: %w", op, err)
	}
	w.Created = st == http.StatusCreated
	return w, nil
}

// Peer gets or creates a peer (POST /v3/workspaces/{w}/peers; src/routers/peers.py get_or_create_peer).
func (c *Client) Peer(ctx context.Context, w, id honchoconf.ID) (Peer, error) {
	const op = "get or create honcho peer"
	if err := need(op, w, id); err != nil {
		return Peer{}, err
	}
	st, b, err := c.do(ctx, op, http.MethodPost, ws(w, "peers"), idBody{id}, http.StatusOK, http.StatusCreated)
	if err != nil {
		return Peer{}, err
	}
	p, err := DecodePeer(b)
	if err == nil && (p.ID != id || p.Workspace != w) {
		err = undecodable("peer", fmt.Errorf("peer %s/%s, asked for %s/%s", p.Workspace, p.ID, w, id))
	}
	if err != nil {
		return Peer{}, fmt.Errorf("%s: %w", op, err)
	}
	p.Created = st == http.StatusCreated
	return p, nil
}

// PeerConfig is a peer's configuration in one session
// (src/schemas/configuration.py PeerConfig, SessionPeerConfig); nil
// leaves Honcho's default.
type PeerConfig struct {
	ObserveMe     *bool `json:"observe_me,omitempty"`
	ObserveOthers *bool `json:"observe_others,omitempty"`
}

type sessionBody struct {
	ID    honchoconf.ID         `json:"id"`
	Peers map[string]PeerConfig `json:"peers,omitempty"`
}

func peerMap(op string, peers map[honchoconf.ID]PeerConfig) (map[string]PeerConfig, error) {
	if peers == nil {
		return nil, nil
	}
	m := make(map[string]PeerConfig, len(peers))
	for id, pc := range peers {
		if id.IsZero() {
			return nil, refuse(op, "a peer id is empty")
		}
		m[id.String()] = pc
	}
	return m, nil
}

// Session gets or creates a session, adding peers (POST
// /v3/workspaces/{w}/sessions; src/routers/sessions.py get_or_create_session).
func (c *Client) Session(ctx context.Context, w, id honchoconf.ID, peers map[honchoconf.ID]PeerConfig) (Session, error) {
	const op = "get or create honcho session"
	if err := need(op, w, id); err != nil {
		return Session{}, err
	}
	m, err := peerMap(op, peers)
	if err != nil {
		return Session{}, err
	}
	st, b, err := c.do(ctx, op, http.MethodPost, ws(w, "sessions"), sessionBody{id, m}, http.StatusOK, http.StatusCreated)
	if err != nil {
		return Session{}, err
	}
	return c.session(op, b, st, w, id)
}

// AddPeers adds peers to a session (POST /v3/workspaces/{w}/sessions/{s}/peers,
// a map of peer to config; 200 with the session; src/routers/sessions.py
// add_peers_to_session).
func (c *Client) AddPeers(ctx context.Context, w, s honchoconf.ID, peers map[honchoconf.ID]PeerConfig) (Session, error) {
	const op = "add peers to honcho session"
	if err := need(op, w, s); err != nil {
		return Session{}, err
	}
	if len(peers) == 0 {
		return Session{}, refuse(op, "no peers")
	}
	m, err := peerMap(op, peers)
	if err != nil {
		return Session{}, err
	}
	st, b, err := c.do(ctx, op, http.MethodPost, ws(w, "sessions", s.String(), "peers"), m, http.StatusOK)
	if err != nil {
		return Session{}, err
	}
	return c.session(op, b, st, w, s)
}

func (c *Client) session(op string, b []byte, st int, w, id honchoconf.ID) (Session, error) {
	s, err := DecodeSession(b)
	if err == nil && (s.ID != id || s.Workspace != w) {
		err = undecodable("session", fmt.Errorf("session %s/%s, asked for %s/%s", s.Workspace, s.ID, w, id))
	}
	if err != nil {
		return Session{}, fmt.Errorf("%s: %w", op, err)
	}
	s.Created = st == http.StatusCreated
	return s, nil
}

// NewMessage is a message to add. Content is stored as sent: text Honcho
// would change (a NUL, which MessageCreate.sanitize_content strips) or
// refuse (over [MaxContent] characters, invalid UTF-8) is refused here.
type NewMessage struct {
	Peer      honchoconf.ID
	Content   string
	Metadata  map[string]string // at most MaxMetadata keys
	CreatedAt time.Time         // zero: Honcho's now
}

type newMessageJSON struct {
	Content   string            `json:"content"`
	PeerID    honchoconf.ID     `json:"peer_id"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt string            `json:"created_at,omitempty"`
}

type batchJSON struct {
	Messages []newMessageJSON `json:"messages"`
}

func (m NewMessage) check(op string, i int) (newMessageJSON, error) {
	switch {
	case m.Peer.IsZero():
		return newMessageJSON{}, refuse(op, "message %d has no peer", i)
	case !utf8.ValidString(m.Content):
		return newMessageJSON{}, refuse(op, "message %d is not valid UTF-8", i)
	case strings.ContainsRune(m.Content, 0):
		return newMessageJSON{}, refuse(op, "message %d holds a NUL, which Honcho would strip", i)
	case utf8.RuneCountInString(m.Content) > MaxContent:
		return newMessageJSON{}, refuse(op, "message %d has %d characters, over Honcho's %d", i, utf8.RuneCountInString(m.Content), MaxContent)
	case len(m.Metadata) > MaxMetadata:
		return newMessageJSON{}, refuse(op, "message %d has %d metadata keys, over %d", i, len(m.Metadata), MaxMetadata)
	}
	j := newMessageJSON{Content: m.Content, PeerID: m.Peer, Metadata: m.Metadata}
	if !m.CreatedAt.IsZero() {
		j.CreatedAt = m.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	return j, nil
}

// AddMessages adds msgs to a session (POST
// /v3/workspaces/{w}/sessions/{s}/messages; 201 with the created
// messages in order; src/routers/messages.py create_messages_for_session),
// in batches of at most [MaxBatch]. Every message is checked before the
// first batch is sent. Each answer must hold exactly the batch's
// messages, in order, with the content and peer sent.
//
// On error the result holds the messages of the batches Honcho confirmed
// before the failing one (never any of the failing batch), so a caller
// can tell what is stored.
func (c *Client) AddMessages(ctx context.Context, w, s honchoconf.ID, msgs []NewMessage) ([]Message, error) {
	const op = "add honcho messages"
	if err := need(op, w, s); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, refuse(op, "no messages")
	}
	all := make([]newMessageJSON, len(msgs))
	for i, m := range msgs {
		j, err := m.check(op, i)
		if err != nil {
			return nil, err
		}
		all[i] = j
	}
	var out []Message
	for start := 0; start < len(all); start += MaxBatch {
		batch := all[start:min(start+MaxBatch, len(all))]
		_, b, err := c.do(ctx, op, http.MethodPost, ws(w, "sessions", s.String(), "messages"), batchJSON{batch}, http.StatusCreated)
		if err != nil {
			return out, err
		}
		got, err := DecodeMessages(b)
		if err == nil {
			err = matchBatch(batch, got, w, s)
		}
		if err != nil {
			return out, fmt.Errorf("%s: messages %d to %d: %w", op, start, start+len(batch)-1, err)
		}
		out = append(out, got...)
	}
	return out, nil
}

func matchBatch(sent []newMessageJSON, got []Message, w, s honchoconf.ID) error {
	if len(got) != len(sent) {
		return undecodable("messages", fmt.Errorf("%d messages stored, %d sent", len(got), len(sent)))
	}
	for i := range got {
		if got[i].Content != sent[i].Content || got[i].Peer != sent[i].PeerID || got[i].Session != s || got[i].Workspace != w {
			return undecodable("messages", fmt.Errorf("[%d] is not the message sent", i))
		}
	}
	return nil
}

type searchBody struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

// Search is a message search's scope: a workspace, or a session or a
// peer of one.
type Search struct {
	Workspace honchoconf.ID
	Session   honchoconf.ID // set: POST /v3/workspaces/{w}/sessions/{s}/search
	Peer      honchoconf.ID // set: POST /v3/workspaces/{w}/peers/{p}/search
}

// Search asks Honcho for up to limit messages matching query in scope
// (src/routers/workspaces.py search_workspace, sessions.py, peers.py
// search_peer; each answers a plain list of messages). Every hit must
// lie in the scope asked for.
func (c *Client) Search(ctx context.Context, scope Search, query string, limit int) ([]Message, error) {
	const op = "search honcho"
	if err := need(op, scope.Workspace); err != nil {
		return nil, err
	}
	path := ws(scope.Workspace, "search")
	switch {
	case !scope.Session.IsZero() && !scope.Peer.IsZero():
		return nil, refuse(op, "a search is of a session or of a peer, not both")
	case !scope.Session.IsZero():
		path = ws(scope.Workspace, "sessions", scope.Session.String(), "search")
	case !scope.Peer.IsZero():
		path = ws(scope.Workspace, "peers", scope.Peer.String(), "search")
	}
	if query == "" || !utf8.ValidString(query) || strings.ContainsRune(query, 0) {
		return nil, refuse(op, "the query is empty or not clean UTF-8")
	}
	if limit < 1 || limit > MaxLimit {
		return nil, refuse(op, "limit %d, want 1 to %d", limit, MaxLimit)
	}
	_, b, err := c.do(ctx, op, http.MethodPost, path, searchBody{query, limit}, http.StatusOK)
	if err != nil {
		return nil, err
	}
	got, err := DecodeMessages(b)
	if err == nil && len(got) > limit {
		err = undecodable("messages", fmt.Errorf("%d hits, limit %d", len(got), limit))
	}
	for i := range got {
		if err != nil {
			break
		}
		m := got[i]
		if m.Workspace != scope.Workspace || (!scope.Session.IsZero() && m.Session != scope.Session) || (!scope.Peer.IsZero() && m.Peer != scope.Peer) {
			err = undecodable("messages", fmt.Errorf("[%d] lies outside the scope searched", i))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return got, nil
}

// Reasoning levels (src/schemas/api.py ReasoningLevel).
var reasoningLevels = []string{"minimal", "low", "medium", "high", "max"}

// Question is a question for the dialectic.
type Question struct {
	Query     string
	Session   honchoconf.ID // zero: every session
	Target    honchoconf.ID // zero: the peer itself
	Reasoning string        // empty: "low", Honcho's default
}

type chatBody struct {
	Query     string         `json:"query"`
	SessionID *honchoconf.ID `json:"session_id,omitempty"`
	Target    *honchoconf.ID `json:"target,omitempty"`
	Stream    bool           `json:"stream"`
	Reasoning string         `json:"reasoning_level"`
}

// Chat asks the dialectic about peer p of workspace w (POST
// /v3/workspaces/{w}/peers/{p}/chat, never streaming; src/routers/peers.py chat).
func (c *Client) Chat(ctx context.Context, w, p honchoconf.ID, q Question) (Answer, error) {
	const op = "ask honcho"
	if err := need(op, w, p); err != nil {
		return Answer{}, err
	}
	n := utf8.RuneCountInString(q.Query)
	if n == 0 || n > MaxQuery || !utf8.ValidString(q.Query) || strings.ContainsRune(q.Query, 0) {
		return Answer{}, refuse(op, "the question must be 1 to %d characters of clean UTF-8", MaxQuery)
	}
	body := chatBody{Query: q.Query, Reasoning: q.Reasoning}
	if body.Reasoning == "" {
		body.Reasoning = "low"
	}
	if !slices.Contains(reasoningLevels, body.Reasoning) {
		return Answer{}, refuse(op, "reasoning level %q, want one of %s", q.Reasoning, strings.Join(reasoningLevels, ", "))
	}
	if !q.Session.IsZero() {
		body.SessionID = &q.Session
	}
	if !q.Target.IsZero() {
		body.Target = &q.Target
	}
	_, b, err := c.do(ctx, op, http.MethodPost, ws(w, "peers", p.String(), "chat"), body, http.StatusOK)
	if err != nil {
		return Answer{}, err
	}
	a, err := DecodeAnswer(b)
	if err != nil {
		return Answer{}, fmt.Errorf("%s: %w", op, err)
	}
	return a, nil
}
