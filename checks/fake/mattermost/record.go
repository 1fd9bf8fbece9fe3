package mattermost

import (
	"bytes"
	"io"
	"net/http"
	"slices"
)

// OpHeader tags a request with the operation a differential test made
// it for (checks/clients): the fake records it and the real server would
// ignore it. It is no part of Mattermost's API.
const OpHeader = "X-Boxmaker-Op"

// Request is one request the fake received: a REST call, a WebSocket
// upgrade (Method "GET", Path "/api/v4/websocket"), or a WebSocket
// action (Method "WS", Path the action, Body its data).
type Request struct {
	Op       string // the OpHeader, or for a WebSocket action its connection's
	Method   string
	Path     string
	RawQuery string
	Body     []byte
	// Auth is how the request was authenticated: "bearer", "token",
	// "cookie", "query", "challenge" (a WebSocket's
	// authentication_challenge), or "" for none.
	Auth string
}

// Recorded returns a copy of every request received, in order.
func (s *Server) Recorded() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.requests)
	for i := range out {
		out[i].Body = bytes.Clone(out[i].Body)
	}
	return out
}

// record keeps r, reading its body and putting it back for the handler.
func (s *Server) record(r *http.Request) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, 1<<22))
		// What is past the recorded part stays for the handler (an
		// upload may be larger than is recorded).
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Op: r.Header.Get(OpHeader), Method: r.Method, Path: r.URL.Path,
		RawQuery: r.URL.RawQuery, Body: body, Auth: authKind(r)})
	s.mu.Unlock()
}

// authKind names where token (app/authentication.go
// ParseAuthTokenFromRequest) found the request's token.
func authKind(r *http.Request) string {
	if c, err := r.Cookie("MMAUTHTOKEN"); err == nil && c.Value != "" {
		return "cookie"
	}
	h := r.Header.Get("Authorization")
	switch {
	case len(h) > 6 && bytes.EqualFold([]byte(h[:7]), []byte("bearer ")):
		return "bearer"
	case len(h) > 5 && bytes.EqualFold([]byte(h[:6]), []byte("token ")):
		return "token"
	case r.URL.Query().Get("access_token") != "":
		return "query"
	}
	return ""
}
