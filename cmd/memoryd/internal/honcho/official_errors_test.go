package honcho

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"wntrmute.dev/boxmaker/checks/clients"
	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
)

// TestOfficialSDKErrors holds memoryd's reading of the fake's error
// answers to the SDK's: a refused key (401, src/security.py) and an
// unhandled exception (500, src/main.py) carry the same status and
// detail to both; an id Honcho would refuse is refused by both before
// anything is sent.
func TestOfficialSDKErrors(t *testing.T) {
	clients.Modules(t)
	f := fake.New(t, fake.Options{Key: "k1"})
	ctx := context.Background()
	type got struct {
		status int
		detail string
	}
	var ours []got
	var ae *APIError
	if _, err := clientFor(t, f.URL, "wrong", honchoconf.DefaultTimeout).Workspace(ctx, honchoconf.MustID("w")); errors.As(err, &ae) {
		ours = append(ours, got{ae.Status, ae.Detail})
	}
	f.SetFailure(http.StatusInternalServerError)
	if _, err := clientFor(t, f.URL, "k1", honchoconf.DefaultTimeout).Workspace(ctx, honchoconf.MustID("w")); errors.As(err, &ae) {
		ours = append(ours, got{ae.Status, ae.Detail})
	}
	f.SetFailure(0)
	if len(ours) != 2 {
		t.Fatalf("memoryd's errors = %+v, want two APIErrors", ours)
	}
	if _, err := honchoconf.ParseID("a b"); err == nil {
		t.Fatal("memoryd accepts the id \"a b\"")
	}

	var run struct {
		Results []struct {
			OK    bool `json:"ok"`
			Error struct {
				Name    string `json:"name"`
				Message string `json:"message"`
				Status  int    `json:"status"`
			} `json:"error"`
		} `json:"results"`
	}
	var failed, refused = run, run
	clients.Run(t, "honcho.js", map[string]any{"url": f.URL, "key": "k1", "workspace": "w", "ops": []any{
		map[string]any{"op": "bad key", "call": "workspace", "key": "wrong"}}}, &run)
	f.SetFailure(http.StatusInternalServerError)
	clients.Run(t, "honcho.js", map[string]any{"url": f.URL, "key": "k1", "workspace": "w", "ops": []sdkOp{{Op: "failure", Call: "workspace"}}}, &failed)
	f.SetFailure(0)
	m := len(f.Requests())
	clients.Run(t, "honcho.js", map[string]any{"url": f.URL, "key": "k1", "workspace": "w", "ops": []sdkOp{{Op: "bad id", Call: "peer", Args: []any{"a b"}}}}, &refused)
	results := append(run.Results, failed.Results...)
	for i, w := range ours {
		r := results[i]
		if r.OK || r.Error.Status != w.status || r.Error.Message != w.detail {
			b, _ := json.Marshal(r)
			t.Errorf("error %d: SDK %s, memoryd status %d detail %q", i, b, w.status, w.detail)
		}
	}
	if refused.Results[0].OK {
		t.Error("the SDK accepted the peer id \"a b\"")
	}
	for _, r := range f.Requests()[m:] {
		if r.Method == "POST" && r.Path != "/v3/workspaces" {
			t.Errorf("the SDK sent %s %s for a refused id; memoryd sends nothing", r.Method, r.Path)
		}
	}
}
