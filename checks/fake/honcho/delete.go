package honcho

import (
	"fmt"
	"net/http"
)

// deleteSession is src/routers/sessions.py delete_session (line 378,
// status_code=202), plastic-labs/honcho commit ddbb90e: crud.get_session
// refuses a session that does not exist or is inactive already
// (ResourceNotFoundException, 404, crud/session.py line 428); otherwise
// the session is marked inactive at once and its deletion is queued
// (deriver/enqueue.py enqueue_deletion), answering {"message": "Session
// deleted successfully"}. The queued job (crud/session.py delete_session,
// line 553) hard-deletes its messages and documents later; the fake runs
// it only when a test calls [Server.RunDeletions], so a client cannot
// rely on the messages being gone when the 202 comes, as with Honcho.
// An inactive session refuses get-or-create and new messages
// (crud/session.py line 236) until the job has run.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, _ []byte) {
	p, ok := wsPath(w, r, "w", "s")
	if !ok {
		return
	}
	s.mu.Lock()
	ws := s.workspaces[p[0]]
	var sess *session
	if ws != nil {
		sess = ws.sessions[p[1]]
	}
	if sess == nil || sess.inactive {
		s.mu.Unlock()
		notFound(w, p[0], p[1])
		return
	}
	sess.inactive = true
	s.mu.Unlock()
	writeJSON(w, http.StatusAccepted, map[string]string{"message": "Session deleted successfully"})
}

// notFound is crud/session.py's ResourceNotFoundException for a session.
func notFound(w http.ResponseWriter, ws, name string) {
	detail(w, http.StatusNotFound, fmt.Sprintf("Session %s not found in workspace %s", name, ws))
}

// RunDeletions runs Honcho's queued deletions: every inactive session
// and its messages are gone, and its name is free again.
func (s *Server) RunDeletions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.messages[:0]
	for _, m := range s.messages {
		if ws := s.workspaces[m.Workspace]; ws != nil && ws.sessions[m.Session] != nil && ws.sessions[m.Session].inactive {
			continue
		}
		kept = append(kept, m)
	}
	s.messages = kept
	for _, ws := range s.workspaces {
		for name, sess := range ws.sessions {
			if sess.inactive {
				delete(ws.sessions, name)
			}
		}
	}
}
