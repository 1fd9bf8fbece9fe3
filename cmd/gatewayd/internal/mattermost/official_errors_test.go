package mattermost

import (
	"context"
	"errors"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/clients"
	fake "wntrmute.dev/boxmaker/checks/fake/mattermost"
)

// TestOfficialErrors holds gatewayd's reading of the fake's error
// answers to Client4's: an AppError's id and status (404, 401, 500) as
// ClientError's server_error_id and status_code, and a 429, whose body
// is plain text (app/ratelimit.go), which Client4 surfaces as an error
// without a status and gatewayd waits out (Retry-After) and retries.
func TestOfficialErrors(t *testing.T) {
	clients.Modules(t)
	srv := fake.New(t)
	bot := srv.AddUser("boxmaker", true)
	c := client(t, srv, bot.Token)
	ctx := context.Background()
	const missing = "aaaaaaaaaaaaaaaaaaaaaaaaaa"

	type want struct {
		op, id string
		status int
	}
	var ours []want
	var ae *APIError
	if _, err := c.GetPost(ctx, missing); errors.As(err, &ae) {
		ours = append(ours, want{"missing post", ae.ID, ae.Status})
	}
	if _, err := client(t, srv, "not-a-token").Me(ctx); errors.As(err, &ae) {
		ours = append(ours, want{"bad token", ae.ID, ae.Status})
	}
	srv.Fail(1)
	if _, err := c.Me(ctx); errors.As(err, &ae) {
		ours = append(ours, want{"server error", ae.ID, ae.Status})
	}
	srv.Throttle(1)
	if _, err := c.Me(ctx); err != nil {
		t.Errorf("gatewayd did not retry a 429: %v", err)
	}
	if len(ours) != 3 {
		t.Fatalf("gatewayd's errors = %+v, want three APIErrors", ours)
	}

	var run officialRun
	// Fail and Throttle count requests, so the official client's run is
	// set up op by op: one Node run per knob.
	clients.Run(t, "mattermost.js", map[string]any{"url": srv.URL(), "token": bot.Token, "ops": []any{
		officialOp{Op: "missing post", Call: "getPost", Args: []any{missing}},
		map[string]any{"op": "bad token", "call": "getMe", "token": "not-a-token"},
	}}, &run)
	srv.Fail(1)
	var failed officialRun
	clients.Run(t, "mattermost.js", map[string]any{"url": srv.URL(), "token": bot.Token, "ops": []officialOp{{Op: "server error", Call: "getMe"}}}, &failed)
	srv.Throttle(1)
	var limited officialRun
	clients.Run(t, "mattermost.js", map[string]any{"url": srv.URL(), "token": bot.Token, "ops": []officialOp{{Op: "limited", Call: "getMe"}, {Op: "after", Call: "getMe"}}}, &limited)

	got := append(append(run.Results, failed.Results...), limited.Results...)
	for i, w := range ours {
		r := got[i]
		if r.OK || r.Error.ServerErrorID != w.id || r.Error.StatusCode != w.status {
			t.Errorf("%s: official client %+v, gatewayd read id %q status %d", w.op, r, w.id, w.status)
		}
	}
	if r := got[3]; r.OK || r.Error.StatusCode != 0 || r.Error.ServerErrorID != "" {
		t.Errorf("429: official client %+v, want an error with no AppError (the body is plain text)", r)
	}
	if !got[4].OK {
		t.Errorf("the official client's call after the 429 failed: %+v", got[4])
	}
}

// TestOfficialStream holds gatewayd's WebSocket upgrades to the
// official WebSocketClient's: the official client always sends
// connection_id and sequence_number (empty and 0 on a first connect,
// which api4/websocket.go treats as fresh); gatewayd sends them on a
// reconnect, with the same shape, and authenticates by header where the
// official client sends an authentication_challenge (docs/clients.md).
func TestOfficialStream(t *testing.T) {
	clients.Modules(t)
	srv := fake.New(t)
	bot := srv.AddUser("boxmaker", true)
	owner := srv.AddUser("owner", false)
	dm := srv.Direct(bot.ID, owner.ID)
	r := runStream(t, srv, bot.Token)
	srv.Drop(false)
	waitConns(t, srv, 1)
	if _, err := srv.PostAs(owner.ID, fake.Post{ChannelID: dm, Message: "after the reconnect"}); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, r, 1)
	var run officialRun
	clients.Run(t, "mattermost.js", map[string]any{"url": srv.URL(), "token": bot.Token, "ops": []officialOp{
		{Op: "connect", Call: "connect"}, {Op: "close", Call: "close"}}}, &run)
	var ours, theirs []fake.Request
	for _, q := range srv.Recorded() {
		switch {
		case q.Path != "/api/v4/websocket":
		case q.Op == "":
			ours = append(ours, q)
		default:
			theirs = append(theirs, q)
		}
	}
	if len(ours) < 2 || len(theirs) != 1 {
		t.Fatalf("upgrades: gatewayd %d, official %d; want at least 2 and 1", len(ours), len(theirs))
	}
	if ours[0].RawQuery != "" || ours[0].Auth != "bearer" || ours[1].Auth != "bearer" {
		t.Errorf("gatewayd's first upgrade: query %q auth %q, reconnect auth %q", ours[0].RawQuery, ours[0].Auth, ours[1].Auth)
	}
	if o, f := clients.QueryShape(ours[1].RawQuery), clients.QueryShape(theirs[0].RawQuery); o != f {
		t.Errorf("reconnect query: gatewayd %s, official %s", o, f)
	}
	for _, q := range srv.Recorded() {
		if q.Method == "WS" && q.Op == "connect" && q.Path == "authentication_challenge" && q.Auth != "" {
			t.Errorf("the official challenge was recorded as already authenticated: %+v", q)
		}
	}
}

func waitConns(t *testing.T, srv *fake.Server, n int) {
	t.Helper()
	for i := 0; srv.Connections() != n; i++ {
		if i > 500 {
			t.Fatalf("connections = %d, want %d", srv.Connections(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPostsSinceNeverPages: a since of 0 or below would make the server
// answer a page of the newest posts (api4/post.go getPostsForChannel
// reads since only above 0), so PostsSince asks from 1 ms.
func TestPostsSinceNeverPages(t *testing.T) {
	srv := fake.New(t)
	bot := srv.AddUser("boxmaker", true)
	owner := srv.AddUser("owner", false)
	dm := srv.Direct(bot.ID, owner.ID)
	for range 70 {
		if _, err := srv.PostAs(owner.ID, fake.Post{ChannelID: dm, Message: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	c := client(t, srv, bot.Token)
	for _, since := range []int64{0, -5000} {
		n := len(srv.Recorded())
		got, err := c.PostsSince(context.Background(), dm, since)
		if err != nil || len(got) != 70 {
			t.Fatalf("PostsSince(%d) = %d posts, %v; want all 70", since, len(got), err)
		}
		if q := srv.Recorded()[n].RawQuery; q != "since=1" {
			t.Errorf("PostsSince(%d) asked %q, want since=1", since, q)
		}
	}
}
