package llama

import "net/http"

// controlResult is the control endpoint's 200 answer (server-task.h:538-549).
type controlResult struct {
	Success bool   `json:"success"`
	Message string `json:"message,omitempty"`
}

// handleControl copies POST /v1/chat/completions/control
// (server.cpp:246; handler server-context.cpp:4811-4845; task 2337-2369;
// README.md:1439-1455). The body is {"id","action","model"}; the router
// needs "model" to route it (server-models.cpp:1914-1922).
func (s *Server) handleControl(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.controls++
	s.mu.Unlock()
	ctx, cancel := s.requestContext(r)
	defer cancel()
	_, fields, ok := s.readBody(w, r)
	if !ok || !s.route(ctx, w, r, fields) {
		return
	}
	id := jsonString(fields, "id", "")
	if id == "" {
		writeError(w, errInvalid("missing completion id"))
		return
	}
	if jsonString(fields, "action", "") != "reasoning_end" {
		writeError(w, errInvalid("unknown control action"))
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// The stream is found by a slot that is processing a task with that
	// completion id (server-context.cpp:1429-1441); a finished or queued
	// one is not found.
	var t *task
	for _, sl := range s.slots {
		if sl.task != nil && sl.task.processing && sl.task.cmplID == id {
			t = sl.task
		}
	}
	switch {
	case t == nil:
		writeJSON(w, http.StatusOK, controlResult{Message: "no active completion for this id"})
	case !t.armed:
		// Without reasoning_control the budget sampler is never created
		// (common/sampling.cpp:311).
		writeJSON(w, http.StatusOK, controlResult{Message: "reasoning control not enabled for this completion"})
	default:
		// success:true even when the model is not thinking: the result of
		// common_reasoning_budget_force is ignored
		// (server-context.cpp:2361-2362); the generation acts on the flag
		// only while reasoning tokens remain.
		t.endReasoning = true
		writeJSON(w, http.StatusOK, controlResult{Success: true})
	}
}
