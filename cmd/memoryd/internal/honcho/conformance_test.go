package honcho

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/host/secret"
)

// target is a Honcho the suite runs against.
type target struct {
	client *Client
	// exact: the fake, whose search is a substring match and whose
	// dialectic answers at once; a real Honcho's search is semantic and
	// its dialectic needs a model.
	exact bool
	chat  bool
	fake  *fake.Server
}

func fakeTarget(t *testing.T, opts fake.Options) target {
	t.Helper()
	f := fake.New(t, opts)
	return target{client: clientFor(t, f.URL, opts.Key, honchoconf.DefaultTimeout), exact: true, chat: true, fake: f}
}

func clientFor(t *testing.T, rawURL, key string, timeout time.Duration) *Client {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	s := honchoconf.Settings{URL: u, Peer: honchoconf.MustID("agent"), Trusted: honchoconf.MustID("t"), Untrusted: honchoconf.MustID("u"), Timeout: timeout}
	var v secret.Value
	if key != "" {
		s.Key, _ = secret.ParseRef("env:BOXMAKER_TEST_UNUSED")
		v = secret.New([]byte(key))
	}
	c, err := New(s, v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestConformance runs one suite against the fake always and against a
// real Honcho when BOXMAKER_HONCHO_URL is set (its key, if auth is on, in
// BOXMAKER_HONCHO_KEY; BOXMAKER_HONCHO_CHAT=1 also asks its dialectic,
// which needs a model configured on that Honcho).
func TestConformance(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		suite(t, fakeTarget(t, fake.Options{Key: "fake-key", Chat: func(c fake.ChatCall) *string {
			a := "answer to " + c.Query
			return &a
		}}))
	})
	t.Run("real", func(t *testing.T) {
		u := os.Getenv("BOXMAKER_HONCHO_URL")
		if u == "" {
			t.Skip("BOXMAKER_HONCHO_URL is not set: no real Honcho to check the client against")
		}
		suite(t, target{client: clientFor(t, u, os.Getenv("BOXMAKER_HONCHO_KEY"), 60*time.Second), chat: os.Getenv("BOXMAKER_HONCHO_CHAT") == "1"})
	})
}

func suite(t *testing.T, tg target) {
	ctx := context.Background()
	c := tg.client
	var rnd [6]byte
	rand.Read(rnd[:])
	run := "bxtest-" + hex.EncodeToString(rnd[:])
	w, p, other, s := honchoconf.MustID(run+"-ws"), honchoconf.MustID("agent"), honchoconf.MustID("owner"), honchoconf.MustID("s1")

	if err := c.Health(ctx); err != nil {
		t.Fatalf("Health: %v", err)
	}
	wsp, err := c.Workspace(ctx, w)
	if err != nil || !wsp.Created || wsp.ID != w || wsp.CreatedAt.IsZero() {
		t.Fatalf("Workspace (new) = %+v, %v; want created", wsp, err)
	}
	if wsp, err = c.Workspace(ctx, w); err != nil || wsp.Created {
		t.Fatalf("Workspace (again) = %+v, %v; want it found, not created", wsp, err)
	}
	pr, err := c.Peer(ctx, w, p)
	if err != nil || !pr.Created || pr.Workspace != w {
		t.Fatalf("Peer (new) = %+v, %v", pr, err)
	}
	if pr, err = c.Peer(ctx, w, p); err != nil || pr.Created {
		t.Fatalf("Peer (again) = %+v, %v", pr, err)
	}
	no := false
	sess, err := c.Session(ctx, w, s, map[honchoconf.ID]PeerConfig{p: {ObserveMe: &no}})
	if err != nil || !sess.Created || !sess.Active || sess.ID != s {
		t.Fatalf("Session (new) = %+v, %v", sess, err)
	}
	if sess, err = c.AddPeers(ctx, w, s, map[honchoconf.ID]PeerConfig{other: {}}); err != nil || sess.ID != s {
		t.Fatalf("AddPeers = %+v, %v", sess, err)
	}

	// 150 messages: two batches, answered in order.
	marker := run + "-marker"
	var msgs []NewMessage
	for i := range 150 {
		from := other
		if i%2 == 1 {
			from = p
		}
		text := fmt.Sprintf("message %d of the run <&> é", i)
		if i == 7 {
			text = "the agent noted the owner likes " + marker
		}
		msgs = append(msgs, NewMessage{Peer: from, Content: text, Metadata: map[string]string{"boxmaker_id": fmt.Sprintf("r%d", i)}})
	}
	got, err := c.AddMessages(ctx, w, s, msgs)
	if err != nil || len(got) != len(msgs) {
		t.Fatalf("AddMessages = %d messages, %v; want %d", len(got), err, len(msgs))
	}
	for i, m := range got {
		if m.Content != msgs[i].Content || m.Peer != msgs[i].Peer || !strings.Contains(string(m.Metadata), fmt.Sprintf(`"r%d"`, i)) || m.ID == "" {
			t.Fatalf("message %d = %+v, want the one sent", i, m)
		}
	}

	for _, scope := range []Search{{Workspace: w}, {Workspace: w, Session: s}, {Workspace: w, Peer: p}} {
		hits, err := c.Search(ctx, scope, marker, 5)
		if err != nil {
			t.Fatalf("Search %+v: %v", scope, err)
		}
		if tg.exact && (len(hits) != 1 || !strings.Contains(hits[0].Content, marker)) {
			t.Fatalf("Search %+v = %+v, want the marked message", scope, hits)
		}
	}
	if hits, err := c.Search(ctx, Search{Workspace: w, Peer: other}, marker, 5); err != nil || tg.exact && len(hits) != 0 {
		t.Fatalf("Search of the other peer = %+v, %v; want no hit", hits, err)
	}

	if tg.chat {
		a, err := c.Chat(ctx, w, p, Question{Query: "What does the owner like?", Target: other, Reasoning: "minimal"})
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		if tg.exact && a.Content != "answer to What does the owner like?" {
			t.Fatalf("Chat = %+v", a)
		}
	}

	// Honcho's own refusals, sent past the client's checks, decode into
	// typed errors: FastAPI's 422 list, with the echoed input dropped.
	_, _, err = c.do(ctx, "raw", http.MethodPost, []string{"v3", "workspaces"}, map[string]string{"id": "not an id"}, http.StatusOK, http.StatusCreated)
	var ae *APIError
	if !errors.As(err, &ae) || !errors.Is(err, ErrValidation) || !ae.Shaped || len(ae.Fields) == 0 || ae.Fields[0] != "body.id" || strings.Contains(err.Error(), "not an id") {
		t.Fatalf("bad id: %v (%+v), want a 422 at body.id not echoing the input", err, ae)
	}
	big := make([]map[string]string, MaxBatch+1)
	for i := range big {
		big[i] = map[string]string{"content": "x", "peer_id": "agent"}
	}
	_, _, err = c.do(ctx, "raw", http.MethodPost, ws(w, "sessions", "s1", "messages"), map[string]any{"messages": big}, http.StatusCreated)
	if !errors.Is(err, ErrValidation) || !errors.As(err, &ae) || len(ae.Fields) == 0 || ae.Fields[0] != "body.messages" {
		t.Fatalf("batch of %d: %v, want a 422 at body.messages", MaxBatch+1, err)
	}
}
