package llama

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// ModelInfo is one element of GET /models' data. A router's entries carry
// Status (reference: llama.cpp tools/server/server-models.cpp, the
// get_router_models route: id, aliases, status {value, args, failed,
// exit_code}); a single-model server's carry none (server-context.cpp,
// the models route), so a nil Status means no router.
type ModelInfo struct {
	ID      string       `json:"id"`
	Aliases []string     `json:"aliases"`
	Status  *ModelStatus `json:"status"`
}

// ModelStatus is a router's view of one model's instance.
type ModelStatus struct {
	// Value is "unloaded", "loading", "loaded", "sleeping" (its child runs
	// and wakes on the next request), "downloading" or "downloaded"
	// (server-models.h, server_model_status_to_string).
	Value    string `json:"value"`
	Failed   bool   `json:"failed"`
	ExitCode int    `json:"exit_code"`
}

// Model status values a router reports.
const (
	ModelUnloaded = "unloaded"
	ModelLoading  = "loading"
	ModelLoaded   = "loaded"
	ModelSleeping = "sleeping"
)

// Models returns GET /models: the router's models and their status, or a
// single-model server's one model.
func (c *Client) Models(ctx context.Context) ([]ModelInfo, error) {
	var out struct {
		Data []ModelInfo `json:"data"`
	}
	if err := c.call(ctx, "models", http.MethodGet, "/models", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// loadRequest is the body of a router's POST /models/load.
type loadRequest struct {
	Model string `json:"model"`
}

// LoadModel asks a router to load the configured model
// (POST /models/load). The router answers once the load has started, not
// when it ends; a model already running (loading, loaded or sleeping) is
// a 400 "model is already running" (server-models.cpp, the
// post_router_models_load route).
func (c *Client) LoadModel(ctx context.Context) error {
	var out struct {
		Success bool `json:"success"`
	}
	if err := c.call(ctx, "load model", http.MethodPost, "/models/load", nil, loadRequest{Model: c.model}, &out); err != nil {
		return err
	}
	if !out.Success {
		return errors.New("load model: the router did not answer success")
	}
	return nil
}

// Loaded says how [Client.EnsureLoaded] found the model.
type Loaded int

const (
	SingleModel  Loaded = iota + 1 // no router: the server serves one model
	WasLoaded                      // the router had it loaded (or sleeping, which the next request wakes)
	LoadedByUs                     // it was unloaded, and this client had the router load it
	LoadedByPeer                   // another client's load was under way, and this client waited for it
)

// LoadError says why [Client.EnsureLoaded] could not get the model
// loaded: the router does not know it, its instance failed to load, or
// the load outlasted the model-load limit. A server that does not answer
// is not a LoadError.
type LoadError struct{ Msg string }

func (e *LoadError) Error() string { return "load model: " + e.Msg }

// loadPoll is how often EnsureLoaded asks a router for the model's status.
const loadPoll = 250 * time.Millisecond

// EnsureLoaded makes sure the configured model is loaded before anything
// asks it with autoload=false (the self-test): against a router it asks
// for the load of an unloaded model and waits for the router to report it
// loaded, within the model-load limit ([Config.ModelLoadTimeout]). A
// single-model server needs nothing. A model the router does not know, a
// load that fails, or one not done within the limit is an error.
func (c *Client) EnsureLoaded(ctx context.Context) (Loaded, error) {
	deadline := time.Now().Add(c.modelLoad)
	how := WasLoaded
	asked := false
	for {
		models, err := c.Models(ctx)
		if err != nil {
			return 0, err
		}
		m, err := c.findModel(models)
		if m == nil || err != nil {
			return 0, err
		}
		if m.Status == nil {
			return SingleModel, nil
		}
		switch st := m.Status; {
		case st.Value == ModelLoaded || st.Value == ModelSleeping:
			return how, nil
		case st.Value == ModelUnloaded && asked && st.Failed:
			return 0, &LoadError{fmt.Sprintf("the router could not load %s (its instance exited with %d)", clip(c.model), st.ExitCode)}
		case st.Value == ModelUnloaded:
			// Not yet asked, or unloaded again since (another model took
			// its place under --models-max): ask (again).
			err := c.LoadModel(ctx)
			var se *ServerError
			if errors.As(err, &se) && se.Status == http.StatusBadRequest {
				// Another client's load began between the two requests:
				// the model is running now, so wait for it as for ours.
				err, how = nil, LoadedByPeer
			} else if err == nil {
				how = LoadedByUs
			}
			if err != nil {
				return 0, err
			}
			asked = true
		case st.Value == ModelLoading && how == WasLoaded:
			how = LoadedByPeer
		}
		if time.Now().After(deadline) {
			return 0, &LoadError{fmt.Sprintf("%s is still %s after the model-load limit of %v", clip(c.model), clip(m.Status.Value), c.modelLoad)}
		}
		select {
		case <-time.After(loadPoll):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// findModel picks the configured model from GET /models by its name or one
// of its aliases (the router resolves aliases the same way:
// server-models.cpp, router_validate_model). A single-model server lists
// the one model it serves under its alias; any entry there will do.
func (c *Client) findModel(models []ModelInfo) (*ModelInfo, error) {
	for i := range models {
		m := &models[i]
		if m.ID == c.model || slices.Contains(m.Aliases, c.model) {
			return m, nil
		}
	}
	if len(models) > 0 && models[0].Status == nil {
		return &models[0], nil
	}
	ids := make([]string, 0, len(models))
	for _, m := range models {
		ids = append(ids, clip(m.ID))
	}
	return nil, &LoadError{fmt.Sprintf("the server has no model %s (it has %v)", clip(c.model), ids)}
}
