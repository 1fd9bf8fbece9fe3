package honcho

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// search serves the three search routes, each a MessageSearchOptions
// body (query required, limit 1 to 100, default 10; src/schemas/api.py
// line 719) answered with a plain list of messages:
// src/routers/workspaces.py search_workspace (line 143, filters gain
// workspace_id), sessions.py "/{session_id}/search" (line 1076) and
// peers.py search_peer (line 822). NULs in the query are stripped
// (sanitize_query). fake: a case-insensitive substring match, oldest
// first, where Honcho runs a hybrid semantic search.
func (s *Server) search(w http.ResponseWriter, r *http.Request, b []byte) {
	keys := []string{"w"}
	sessionID, peerID := r.PathValue("s"), r.PathValue("p")
	if sessionID != "" {
		keys = append(keys, "s")
	}
	if peerID != "" {
		keys = append(keys, "p")
	}
	if _, ok := wsPath(w, r, keys...); !ok {
		return
	}
	m, ok := parseBody(w, b)
	if !ok {
		return
	}
	var errs []verr
	query, _ := m.str(&errs, []any{"body"}, "query", true)
	limit := m.integer(&errs, []any{"body"}, "limit", 10, 1, maxLimit)
	if len(errs) > 0 {
		invalid(w, errs)
		return
	}
	q := strings.ToLower(strings.ReplaceAll(query, "\x00", ""))
	wsName := r.PathValue("w")
	s.mu.Lock()
	hits := []messageOut{}
	for _, msg := range s.messages {
		if len(hits) == limit {
			break
		}
		if msg.Workspace != wsName || sessionID != "" && msg.Session != sessionID || peerID != "" && msg.Peer != peerID {
			continue
		}
		if strings.Contains(strings.ToLower(msg.Content), q) {
			hits = append(hits, s.out(msg))
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, hits)
}

// reasoningLevels is src/config.py ReasoningLevel (line 1007).
var reasoningLevels = []string{"minimal", "low", "medium", "high", "max"}

// chat is src/routers/peers.py chat (line 278) with DialecticOptions
// (src/schemas/api.py line 756): query 1 to 10 000 characters,
// reasoning_level one of ReasoningLevel (default "low"), session_id and
// target optional, stream false gives {"content": str | null}; stream
// true gives text/event-stream frames of DialecticStreamChunk ending with
// done. The peer (and its workspace) is created if missing.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, b []byte) {
	p, ok := wsPath(w, r, "w", "p")
	if !ok {
		return
	}
	m, ok := parseBody(w, b)
	if !ok {
		return
	}
	var errs []verr
	call := ChatCall{Workspace: p[0], Peer: p[1], Reasoning: "low"}
	if q, ok := m.str(&errs, []any{"body"}, "query", true); ok {
		lengths(&errs, []any{"body", "query"}, q, 1, maxQuery)
		call.Query = strings.ReplaceAll(q, "\x00", "")
	}
	call.Session, _ = m.str(&errs, []any{"body"}, "session_id", false)
	call.Target, _ = m.str(&errs, []any{"body"}, "target", false)
	if lv, ok := m.str(&errs, []any{"body"}, "reasoning_level", false); ok {
		call.Reasoning = lv
		found := false
		for _, l := range reasoningLevels {
			found = found || l == lv
		}
		if !found {
			expected := "'minimal', 'low', 'medium', 'high' or 'max'"
			errs = append(errs, verr{Type: "literal_error", Loc: []any{"body", "reasoning_level"}, Msg: "Input should be " + expected, Input: lv, Ctx: map[string]any{"expected": expected}})
		}
	}
	stream := false
	if v, ok := m["stream"]; ok && json.Unmarshal(v, &stream) != nil {
		errs = append(errs, verr{Type: "bool_type", Loc: []any{"body", "stream"}, Msg: "Input should be a valid boolean", Input: raw(v)})
	}
	if len(errs) > 0 {
		invalid(w, errs)
		return
	}
	s.mu.Lock()
	ws, _ := s.ensureWorkspace(p[0])
	s.ensurePeer(ws, p[1])
	s.mu.Unlock()
	var answer *string
	if s.opts.Chat != nil {
		answer = s.opts.Chat(call)
	}
	if answer != nil && *answer == "" {
		answer = nil // `content=response if response else None`
	}
	if !stream {
		writeJSON(w, http.StatusOK, map[string]*string{"content": answer})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if answer != nil {
		frame, _ := json.Marshal(map[string]any{"delta": map[string]string{"content": *answer}, "done": false})
		fmt.Fprintf(w, "data: %s\n\n", frame)
	}
	fmt.Fprint(w, "data: {\"done\": true}\n\n")
}
