package honcho

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Options shape a fake Honcho.
type Options struct {
	// Key, if set, turns auth on (AUTH_USE_AUTH=true, src/security.py):
	// every /v3 route wants "Bearer " + Key.
	Key string
	// Chat answers the dialectic; nil answers content null, as Honcho does
	// when the model returns nothing (src/routers/peers.py chat, its last line).
	Chat func(ChatCall) *string
	// Now stamps created_at; nil is time.Now.
	Now func() time.Time
}

// ChatCall is one dialectic question, as the fake received it.
type ChatCall struct {
	Workspace, Peer, Query, Session, Target, Reasoning string
}

// Request is one request the fake received.
type Request struct {
	Method, Path, RawQuery string
	Authorized             bool // carried the right key (always true without Options.Key)
	Body                   []byte
	// Op is the request's X-Boxmaker-Op header: the operation a
	// differential test (checks/clients) made it for. Honcho has no
	// such header; the fake only records it.
	Op string
}

// Server is a running fake Honcho.
type Server struct {
	*httptest.Server
	opts Options

	mu         sync.Mutex // guards everything below
	workspaces map[string]*workspace
	messages   []*message // every workspace's, in creation order
	requests   []Request
	delay      time.Duration
	failStatus int
	nextID     int
}

type workspace struct {
	created  time.Time
	peers    map[string]time.Time
	sessions map[string]*session
}

type session struct {
	created time.Time
	peers   map[string]json.RawMessage // peer -> its SessionPeerConfig as sent
	// inactive: deleted, its messages kept until [Server.RunDeletions]
	// (Honcho's queued deletion job; delete.go).
	inactive bool
}

type message struct {
	ID, Content, Peer, Session, Workspace string
	Metadata                              json.RawMessage
	Created                               time.Time
	Tokens                                int
}

// New starts a fake Honcho on a loopback port, closed when tb's test ends.
func New(tb testing.TB, opts Options) *Server {
	s := &Server{opts: opts, workspaces: map[string]*workspace{}}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	s.Server = httptest.NewServer(s.handler())
	tb.Cleanup(s.Close)
	return s
}

// SetDelay makes every later answer wait d first (0: none).
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// SetFailure makes every later /v3 request answer status with Honcho's
// unhandled-exception body (src/main.py global_exception_handler); 0
// restores normal answers.
func (s *Server) SetFailure(status int) {
	s.mu.Lock()
	s.failStatus = status
	s.mu.Unlock()
}

// Requests returns a copy of every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// StoredMessage is a message the fake holds.
type StoredMessage struct {
	ID, Workspace, Session, Peer, Content string
	Metadata                              json.RawMessage
}

// Messages returns every message stored, in creation order.
func (s *Server) Messages() []StoredMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]StoredMessage, len(s.messages))
	for i, m := range s.messages {
		out[i] = StoredMessage{m.ID, m.Workspace, m.Session, m.Peer, m.Content, bytes.Clone(m.Metadata)}
	}
	return out
}

// maxBody caps a request body; fake: Honcho leaves this to its server.
const maxBody = 64 << 20

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	// src/main.py health_check: {"status": "ok"}, no auth.
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	v3 := map[string]func(w http.ResponseWriter, r *http.Request, body []byte){
		"POST /v3/workspaces":                                s.getOrCreateWorkspace,
		"POST /v3/workspaces/{w}/peers":                      s.getOrCreatePeer,
		"POST /v3/workspaces/{w}/sessions":                   s.getOrCreateSession,
		"POST /v3/workspaces/{w}/sessions/{s}/peers":         s.addPeers,
		"POST /v3/workspaces/{w}/sessions/{s}/messages":      s.createMessages,
		"POST /v3/workspaces/{w}/sessions/{s}/messages/list": s.listMessages,
		"POST /v3/workspaces/{w}/search":                     s.search,
		"POST /v3/workspaces/{w}/sessions/{s}/search":        s.search,
		"POST /v3/workspaces/{w}/peers/{p}/search":           s.search,
		"POST /v3/workspaces/{w}/peers/{p}/chat":             s.chat,
		"DELETE /v3/workspaces/{w}/sessions/{s}":             s.deleteSession,
	}
	for pattern, h := range v3 {
		mux.HandleFunc(pattern, s.wrap(h))
	}
	// Starlette's default for a route that does not exist.
	mux.HandleFunc("/", s.wrap(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		detail(w, http.StatusNotFound, "Not Found")
	}))
	return mux
}

// wrap records the request, applies the knobs and the key, then serves.
func (s *Server) wrap(h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(body) > maxBody {
			detail(w, http.StatusRequestEntityTooLarge, "File too large")
			return
		}
		auth := s.opts.Key == "" || r.Header.Get("Authorization") == "Bearer "+s.opts.Key
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Authorized: auth, Body: body, Op: r.Header.Get("X-Boxmaker-Op")})
		delay, fail := s.delay, s.failStatus
		s.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		if fail != 0 {
			detail(w, fail, "An unexpected error occurred")
			return
		}
		if s.opts.Key != "" && !auth {
			// src/security.py require_auth: no header gives "No access
			// token provided" (line 215); a wrong one "Invalid JWT"
			// (verify_jwt, line 145). Both are AuthenticationException, 401.
			if r.Header.Get("Authorization") == "" {
				detail(w, http.StatusUnauthorized, "No access token provided")
			} else {
				detail(w, http.StatusUnauthorized, "Invalid JWT")
			}
			return
		}
		h(w, r, body)
	}
}

// detail writes a HonchoException's body (src/main.py
// honcho_exception_handler: {"detail": exc.detail}).
func detail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"detail": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("fake honcho: encode %T: %v", v, err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// stamp formats a time as pydantic v2 serialises an aware datetime
// (FastAPI's jsonable_encoder of schemas' created_at).
func stamp(t time.Time) string {
	t = t.UTC().Truncate(time.Microsecond)
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Format("2006-01-02T15:04:05.000000Z")
}
