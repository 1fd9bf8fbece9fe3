package llama

import (
	"net/http"
	"time"
)

// The router-only endpoints the fake serves, copied from llama.cpp at
// 1425386fd (the reference notes, at 3f545bec, place the same routes at
// server.cpp:227-231 and server-models.cpp:1945-2140): GET /models (and
// /v1/models) and POST /models/load (server.cpp:216-219, 230-231). The
// fake is one model from a preset (source "preset", never removable).

// modelStatusJSON is a model's status object (server-models.cpp:1651-1665;
// "failed" and "exit_code" only after a failed load, which the fake never
// has).
type modelStatusJSON struct {
	Value string   `json:"value"`
	Args  []string `json:"args"`
}

type architectureJSON struct {
	InputModalities  []string `json:"input_modalities"`
	OutputModalities []string `json:"output_modalities"`
}

// modelJSON is one element of the router's GET /models data, keys as
// server-models.cpp:1679-1690 sends them (nlohmann's json sorts keys on
// output; the fake's order does not matter to a JSON reader). Reference
// silent on the child's loaded_info merged in while it runs (:1692-1699);
// the fake adds none.
type modelJSON struct {
	ID           string           `json:"id"`
	Aliases      []string         `json:"aliases"`
	Tags         []string         `json:"tags"`
	Object       string           `json:"object"`
	OwnedBy      string           `json:"owned_by"`
	Created      int64            `json:"created"`
	Status       modelStatusJSON  `json:"status"`
	Architecture architectureJSON `json:"architecture"`
	Source       string           `json:"source"`
	CanRemove    bool             `json:"can_remove"`
}

// status is the model's status string (server-models.h:51-61): loading
// while a load is under way (load() sets it before it answers,
// server-models.cpp:818), loaded, or unloaded.
func (s *Server) status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.loaded:
		return "loaded"
	case s.loading != nil:
		return "loading"
	}
	return "unloaded"
}

// handleModels copies the router's GET /models (server-models.cpp:1644-1715):
// every model with its status, never loading one.
func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	args := []string{}
	if st := s.status(); st != "unloaded" {
		// The child's command line while it runs (:1653); reference
		// silent on its exact words, the fake names its own.
		args = []string{"llama-server", "--alias", s.opts.ModelAlias}
	}
	m := modelJSON{
		ID: s.opts.ModelAlias, Aliases: []string{}, Tags: []string{}, Object: "model", OwnedBy: "llamacpp",
		Created: time.Now().Unix(), Status: modelStatusJSON{Value: s.status(), Args: args},
		Architecture: architectureJSON{InputModalities: []string{"text"}, OutputModalities: []string{"text"}},
		Source:       "preset",
	}
	writeJSON(w, http.StatusOK, struct {
		Data   []modelJSON `json:"data"`
		Object string      `json:"object"`
	}{[]modelJSON{m}, "list"})
}

// handleModelsLoad copies the router's POST /models/load
// (server-models.cpp:1626-1642): 404 not_found_error "model is not found"
// for an unknown name, 400 "model is already running" while it is loading
// or loaded (server-models.h:93-95), else the load starts and the answer
// is {"success":true} at once, before it ends.
func (s *Server) handleModelsLoad(w http.ResponseWriter, r *http.Request) {
	_, fields, ok := s.readBody(w, r)
	if !ok {
		return
	}
	if jsonString(fields, "model", "") != s.opts.ModelAlias {
		writeError(w, &apiError{Code: 404, Message: "model is not found", Type: "not_found_error"})
		return
	}
	if s.status() != "unloaded" {
		writeError(w, errInvalid("model is already running"))
		return
	}
	s.startLoad()
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}
