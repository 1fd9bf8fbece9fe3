package honcho

import (
	"encoding/json"
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// The response shapes, field for field as FastAPI serialises Honcho's
// schemas by alias (src/schemas/api.py: Workspace, Peer, Session,
// Message, DialecticResponse). No field is optional: each schema declares
// every one of them, with default_factory=dict for the objects.
type (
	workspaceJSON struct {
		ID            string          `json:"id"`
		Metadata      json.RawMessage `json:"metadata"`
		Configuration json.RawMessage `json:"configuration"`
		CreatedAt     string          `json:"created_at"`
	}
	peerJSON struct {
		ID            string          `json:"id"`
		WorkspaceID   string          `json:"workspace_id"`
		CreatedAt     string          `json:"created_at"`
		Metadata      json.RawMessage `json:"metadata"`
		Configuration json.RawMessage `json:"configuration"`
	}
	sessionJSON struct {
		ID            string          `json:"id"`
		IsActive      bool            `json:"is_active"`
		WorkspaceID   string          `json:"workspace_id"`
		Metadata      json.RawMessage `json:"metadata"`
		Configuration json.RawMessage `json:"configuration"`
		CreatedAt     string          `json:"created_at"`
	}
	messageJSON struct {
		ID          string          `json:"id"`
		Content     string          `json:"content"`
		PeerID      string          `json:"peer_id"`
		SessionID   string          `json:"session_id"`
		Metadata    json.RawMessage `json:"metadata"`
		CreatedAt   string          `json:"created_at"`
		WorkspaceID string          `json:"workspace_id"`
		TokenCount  int64           `json:"token_count"`
	}
	chatJSON struct {
		Content *string `json:"content"`
	}
	healthJSON struct {
		Status string `json:"status"`
	}
)

// Workspace is a workspace as Honcho holds it.
type Workspace struct {
	ID            honchoconf.ID
	Metadata      json.RawMessage // a JSON object
	Configuration json.RawMessage // a JSON object
	CreatedAt     time.Time
	Created       bool // 201: this request made it
}

// Peer is a peer of one workspace.
type Peer struct {
	ID, Workspace honchoconf.ID
	Metadata      json.RawMessage
	Configuration json.RawMessage
	CreatedAt     time.Time
	Created       bool
}

// Session is a session of one workspace.
type Session struct {
	ID, Workspace honchoconf.ID
	Active        bool
	Metadata      json.RawMessage
	Configuration json.RawMessage
	CreatedAt     time.Time
	Created       bool
}

// Message is a stored message, as returned by adding messages and by search.
type Message struct {
	ID         string // Honcho's public id (a nanoid), not one of ours
	Content    string
	Peer       honchoconf.ID
	Session    honchoconf.ID
	Workspace  honchoconf.ID
	Metadata   json.RawMessage
	CreatedAt  time.Time
	TokenCount int64
}

// Answer is the dialectic's answer. Honcho sends content null when the
// model said nothing (src/routers/peers.py chat: `content=response if
// response else None`); Empty is then true.
type Answer struct {
	Content string
	Empty   bool
}

// undecodable wraps a decoding failure as [ErrUndecodable].
func undecodable(what string, err error) error {
	return fmt.Errorf("decode honcho %s: %w: %v", what, ErrUndecodable, err)
}

// fields checks the parts every resource shares: ids by Honcho's rule, a
// time in RFC 3339 (pydantic's datetime), metadata objects.
type fields struct{ err error }

func (f *fields) id(name, s string) honchoconf.ID {
	id, err := honchoconf.ParseID(s)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s: %v", name, err)
	}
	return id
}

func (f *fields) time(name, s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s is not an RFC 3339 time", name)
	}
	return t
}

func (f *fields) object(name string, raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if err := strict.Unmarshal(raw, &m); (err != nil || m == nil) && f.err == nil {
		f.err = fmt.Errorf("%s is not a JSON object", name)
	}
	return raw
}

// DecodeWorkspace decodes a workspace (get-or-create's answer).
func DecodeWorkspace(b []byte) (Workspace, error) {
	var j workspaceJSON
	if err := strict.Unmarshal(b, &j); err != nil {
		return Workspace{}, undecodable("workspace", err)
	}
	var f fields
	w := Workspace{ID: f.id("id", j.ID), Metadata: f.object("metadata", j.Metadata),
		Configuration: f.object("configuration", j.Configuration), CreatedAt: f.time("created_at", j.CreatedAt)}
	if f.err != nil {
		return Workspace{}, undecodable("workspace", f.err)
	}
	return w, nil
}

// DecodePeer decodes a peer.
func DecodePeer(b []byte) (Peer, error) {
	var j peerJSON
	if err := strict.Unmarshal(b, &j); err != nil {
		return Peer{}, undecodable("peer", err)
	}
	var f fields
	p := Peer{ID: f.id("id", j.ID), Workspace: f.id("workspace_id", j.WorkspaceID), CreatedAt: f.time("created_at", j.CreatedAt),
		Metadata: f.object("metadata", j.Metadata), Configuration: f.object("configuration", j.Configuration)}
	if f.err != nil {
		return Peer{}, undecodable("peer", f.err)
	}
	return p, nil
}

// DecodeSession decodes a session.
func DecodeSession(b []byte) (Session, error) {
	var j sessionJSON
	if err := strict.Unmarshal(b, &j); err != nil {
		return Session{}, undecodable("session", err)
	}
	var f fields
	s := Session{ID: f.id("id", j.ID), Active: j.IsActive, Workspace: f.id("workspace_id", j.WorkspaceID),
		Metadata: f.object("metadata", j.Metadata), Configuration: f.object("configuration", j.Configuration), CreatedAt: f.time("created_at", j.CreatedAt)}
	if f.err != nil {
		return Session{}, undecodable("session", f.err)
	}
	return s, nil
}

// DecodeMessages decodes a plain list of messages (adding a batch, and
// every search route: response_model=list[schemas.Message]).
func DecodeMessages(b []byte) ([]Message, error) {
	var js []messageJSON
	if err := strict.Unmarshal(b, &js); err != nil {
		return nil, undecodable("messages", err)
	}
	if js == nil {
		return nil, undecodable("messages", fmt.Errorf("null, want a list"))
	}
	out := make([]Message, 0, len(js))
	for i, j := range js {
		var f fields
		m := Message{ID: j.ID, Content: j.Content, Peer: f.id("peer_id", j.PeerID), Session: f.id("session_id", j.SessionID),
			Metadata: f.object("metadata", j.Metadata), CreatedAt: f.time("created_at", j.CreatedAt),
			Workspace: f.id("workspace_id", j.WorkspaceID), TokenCount: j.TokenCount}
		if j.ID == "" && f.err == nil {
			f.err = fmt.Errorf("id is empty")
		}
		if j.TokenCount < 0 && f.err == nil {
			f.err = fmt.Errorf("token_count is negative")
		}
		if f.err != nil {
			return nil, undecodable("messages", fmt.Errorf("[%d]: %v", i, f.err))
		}
		out = append(out, m)
	}
	return out, nil
}

// DecodeAnswer decodes the dialectic's non-streaming answer.
func DecodeAnswer(b []byte) (Answer, error) {
	var j chatJSON
	if err := strict.Unmarshal(b, &j); err != nil {
		return Answer{}, undecodable("chat answer", err)
	}
	if j.Content == nil || *j.Content == "" {
		return Answer{Empty: true}, nil
	}
	return Answer{Content: *j.Content}, nil
}

// DecodeHealth decodes GET /health: {"status":"ok"} and nothing else.
func DecodeHealth(b []byte) error {
	var j healthJSON
	if err := strict.Unmarshal(b, &j); err != nil {
		return undecodable("health", err)
	}
	if j.Status != "ok" {
		return undecodable("health", fmt.Errorf("status %q, want \"ok\"", clean(j.Status)))
	}
	return nil
}
