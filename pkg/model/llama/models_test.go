package llama_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/model/llama"
)

// TestEnsureLoaded: against a router (the fake is one model behind one)
// EnsureLoaded leaves a loaded model alone, has an unloaded one loaded
// and waits for it, waits for a load someone else started, and refuses
// an unknown name and a load that outlasts the model-load limit. After
// it, the autoload=false requests the self-test makes are answered.
func TestEnsureLoaded(t *testing.T) {
	tests := []struct {
		name    string
		unload  bool
		peer    bool // another client starts the load first
		model   string
		limit   time.Duration
		want    llama.Loaded
		wantErr string
	}{
		{name: "loaded", want: llama.WasLoaded},
		{name: "unloaded", unload: true, want: llama.LoadedByUs},
		{name: "loading by another client", unload: true, peer: true, want: llama.LoadedByPeer},
		{name: "unknown model", model: "no-such-model", wantErr: `load model: the server has no model "no-such-model" (it has ["fake-model"])`},
		{name: "over the limit", unload: true, limit: 100 * time.Millisecond, wantErr: `load model: "fake-model" is still "loading" after the model-load limit of 100ms`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.New(t, fake.Options{LoadTime: 600 * time.Millisecond})
			c := newFakeClient(t, srv, llama.Config{Model: tt.model, ModelLoadTimeout: tt.limit})
			if tt.unload {
				srv.Unload()
				if _, err := c.Props(t.Context()); err == nil || !strings.Contains(err.Error(), "model is not loaded") {
					t.Fatalf("Props of an unloaded model = %v, want the router's 400 \"model is not loaded\"", err)
				}
			}
			if tt.peer {
				resp, err := http.Post(srv.URL()+"/models/load", "application/json", strings.NewReader(`{"model":"fake-model"}`))
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("POST /models/load = %v, %v", resp, err)
				}
				resp.Body.Close()
			}
			got, err := c.EnsureLoaded(t.Context())
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.As(err, new(*llama.LoadError)) {
					t.Fatalf("EnsureLoaded = %v, %v; want the LoadError %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("EnsureLoaded = %v, %v; want %v", got, err, tt.want)
			}
			if _, err := c.Props(t.Context()); err != nil {
				t.Errorf("Props after EnsureLoaded: %v", err)
			}
		})
	}
}

// TestLoadModelRunning: the router refuses a load of a model already
// running with its 400, and an unknown one with its 404.
func TestLoadModelRunning(t *testing.T) {
	srv := fake.New(t, fake.Options{})
	var se *llama.ServerError
	err := newFakeClient(t, srv, llama.Config{}).LoadModel(t.Context())
	if !errors.As(err, &se) || se.Status != http.StatusBadRequest || se.Message != "model is already running" {
		t.Errorf("LoadModel of a loaded model = %v, want 400 model is already running", err)
	}
	err = newFakeClient(t, srv, llama.Config{Model: "other"}).LoadModel(t.Context())
	if !errors.As(err, &se) || se.Status != http.StatusNotFound || se.Type != "not_found_error" {
		t.Errorf("LoadModel of an unknown model = %v, want 404 not_found_error", err)
	}
}
