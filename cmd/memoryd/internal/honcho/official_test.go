package honcho

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/clients"
	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
)

type sdkOp struct {
	Op   string `json:"op"`
	Call string `json:"call"`
	Args []any  `json:"args,omitempty"`
}

type sdkRun struct {
	Results []struct {
		Op    string          `json:"op"`
		OK    bool            `json:"ok"`
		Error json.RawMessage `json:"error"`
	} `json:"results"`
	Answers []struct {
		Op     string `json:"op"`
		Method string `json:"method"`
		Path   string `json:"path"`
		Status int    `json:"status"`
		Body   string `json:"body"`
	} `json:"answers"`
}

// sdkOps maps each operation of [Client] to the SDK call that performs
// it and the TypeScript type of its answer; [TestOfficialCoverage] holds
// this table to the client's exported methods. Health has no SDK call
// (docs/clients.md).
var sdkOps = map[string]struct{ call, answer string }{
	"Workspace":    {"workspace", "WorkspaceResponse"},
	"Peer":         {"peer", "PeerResponse"},
	"Session":      {"session", "SessionResponse"},
	"AddPeers":     {"addPeers", "SessionResponse"},
	"AddMessages":  {"addMessages", "MessageResponse[]"},
	"ListMessages": {"messages", "PageResponse<MessageResponse>"},
	"Search":       {"searchWorkspace", "MessageResponse[]"},
	"Chat":         {"chat", "PeerChatResponse"},
	// Session.delete() is declared Promise<void>: the SDK reads no body.
	"DeleteSession": {"deleteSession", "void"},
}

// TestOfficialSDK runs memoryd's client and @honcho-ai/sdk against the
// same fake, operation by operation, and holds memoryd's requests to the
// SDK's (method, path, query and body shape) and the fake's answers to
// the SDK's declared response types.
func TestOfficialSDK(t *testing.T) {
	clients.Modules(t)
	f := fake.New(t, fake.Options{Key: "k1", Chat: func(c fake.ChatCall) *string {
		a := "an answer"
		return &a
	}})
	c := clientFor(t, f.URL, "k1", honchoconf.DefaultTimeout)
	ctx := context.Background()
	w, s, agent, owner := honchoconf.MustID("ws1"), honchoconf.MustID("s1"), honchoconf.MustID("agent"), honchoconf.MustID("owner")
	ours := map[string][]fake.Request{}
	mark := func(op string, fn func() error) {
		t.Helper()
		n := len(f.Requests())
		if err := fn(); err != nil {
			t.Fatalf("memoryd %s: %v", op, err)
		}
		ours[op] = f.Requests()[n:]
	}
	no := false
	mark("Workspace", func() error { _, err := c.Workspace(ctx, w); return err })
	mark("Peer", func() error { _, err := c.Peer(ctx, w, agent); return err })
	mark("Session", func() error {
		_, err := c.Session(ctx, w, s, map[honchoconf.ID]PeerConfig{agent: {ObserveMe: &no}})
		return err
	})
	mark("AddPeers", func() error {
		_, err := c.AddPeers(ctx, w, s, map[honchoconf.ID]PeerConfig{owner: {ObserveMe: &no}})
		return err
	})
	mark("AddMessages", func() error {
		_, err := c.AddMessages(ctx, w, s, []NewMessage{{Peer: owner, Content: "likes tea", Metadata: map[string]string{"boxmaker_id": "r1"}}})
		return err
	})
	mark("ListMessages", func() error { _, err := c.ListMessages(ctx, w, s, 1, MaxPageSize, true); return err })
	mark("Search", func() error { _, err := c.Search(ctx, Search{Workspace: w}, "tea", 5); return err })
	mark("Search session", func() error { _, err := c.Search(ctx, Search{Workspace: w, Session: s}, "tea", 5); return err })
	mark("Search peer", func() error { _, err := c.Search(ctx, Search{Workspace: w, Peer: owner}, "tea", 5); return err })
	mark("Chat", func() error {
		_, err := c.Chat(ctx, w, agent, Question{Query: "what does the owner like?", Target: owner, Reasoning: "minimal"})
		return err
	})
	gone := honchoconf.MustID("s2")
	if _, err := c.Session(ctx, w, gone, nil); err != nil {
		t.Fatal(err)
	}
	mark("DeleteSession", func() error { return c.DeleteSession(ctx, w, gone) })
	f.RunDeletions() // Honcho's deletion job: the SDK then makes s2 anew and deletes it

	ops := []sdkOp{
		{"Workspace", "workspace", nil},
		{"Peer", "peer", []any{"agent"}},
		{"Session", "session", []any{"s1", []any{[]any{"agent", map[string]any{"observeMe": false}}}}},
		{"AddPeers", "addPeers", []any{"s1", []any{[]any{"owner", map[string]any{"observeMe": false}}}}},
		{"AddMessages", "addMessages", []any{"s1", "owner", "likes tea", map[string]any{"boxmaker_id": "r1"}}},
		{"ListMessages", "messages", []any{"s1", 1, MaxPageSize, true}},
		{"Search", "searchWorkspace", []any{"tea", 5}},
		{"Search session", "searchSession", []any{"s1", "tea", 5}},
		{"Search peer", "searchPeer", []any{"owner", "tea", 5}},
		{"Chat", "chat", []any{"agent", "what does the owner like?", "owner", "minimal"}},
		{"DeleteSession", "deleteSession", []any{"s2"}},
	}
	var run sdkRun
	clients.Run(t, "honcho.js", map[string]any{"url": f.URL, "key": "k1", "workspace": "ws1", "ops": ops}, &run)
	for _, r := range run.Results {
		if !r.OK {
			t.Errorf("SDK %s failed: %s", r.Op, r.Error)
		}
	}
	theirs := map[string][]fake.Request{}
	for _, r := range f.Requests() {
		if r.Op != "" {
			theirs[r.Op] = append(theirs[r.Op], r)
		}
	}
	for _, o := range ops {
		t.Run(o.Op, func(t *testing.T) { compareHoncho(t, o.Op, ours[o.Op], theirs[o.Op]) })
	}

	// The fake's answers to the SDK, each against the SDK's type for it.
	var checks []clients.TypeCheck
	for _, a := range run.Answers {
		if a.Method == "DELETE" {
			continue // the SDK declares Promise<void> for a delete and reads no body
		}
		typ := answerType(a.Method, a.Path)
		if typ == "" {
			t.Errorf("SDK op %s: an answer to %s %s that no operation expects", a.Op, a.Method, a.Path)
			continue
		}
		checks = append(checks, clients.TypeCheck{Label: a.Op + ": " + a.Method + " " + a.Path, Type: typ, Value: json.RawMessage(a.Body)})
	}
	clients.CheckTypes(t, `import type {WorkspaceResponse, PeerResponse, SessionResponse, MessageResponse, PageResponse, PeerChatResponse} from '@honcho-ai/sdk/dist/types/api';`, checks)
}

// answerType is the SDK's declared type of the answer to a route.
func answerType(method, path string) string {
	p := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case method != "POST" || len(p) < 2 || p[0] != "v3" || p[1] != "workspaces":
		return ""
	case len(p) == 2:
		return "WorkspaceResponse"
	case len(p) == 4 && p[3] == "peers":
		return "PeerResponse"
	case len(p) == 4 && p[3] == "sessions", len(p) == 6 && p[5] == "peers" && p[3] == "sessions":
		return "SessionResponse"
	case len(p) == 6 && p[5] == "messages":
		return "MessageResponse[]"
	case len(p) == 7 && p[6] == "list":
		return "PageResponse<MessageResponse>"
	case p[len(p)-1] == "search":
		return "MessageResponse[]"
	case len(p) == 6 && p[5] == "chat":
		return "PeerChatResponse"
	}
	return ""
}

// compareHoncho finds, among the SDK's requests for op (it also gets or
// creates the objects it needs), the one to memoryd's route, and holds
// memoryd's to it: method, path, query shape, body shape, the key.
func compareHoncho(t *testing.T, op string, ours, theirs []fake.Request) {
	t.Helper()
	if len(ours) != 1 {
		t.Fatalf("%s: memoryd made %d requests, want 1", op, len(ours))
	}
	o := ours[0]
	var f *fake.Request
	for i := range theirs {
		if theirs[i].Method == o.Method && theirs[i].Path == o.Path {
			f = &theirs[i]
		}
	}
	if f == nil {
		t.Fatalf("%s: memoryd sent %s %s; the SDK never did (it sent %v)", op, o.Method, o.Path, paths(theirs))
	}
	if !o.Authorized || !f.Authorized {
		t.Errorf("%s: authorized memoryd %v, SDK %v", op, o.Authorized, f.Authorized)
	}
	if oq, fq := clients.QueryShape(o.RawQuery), clients.QueryShape(f.RawQuery); oq != fq {
		t.Errorf("%s: memoryd query %q (%s), SDK %q (%s)", op, o.RawQuery, oq, f.RawQuery, fq)
	}
	if os, fs := clients.Shape(o.Body), clients.Shape(f.Body); os != fs {
		t.Errorf("%s: memoryd body %s\nSDK body     %s", op, os, fs)
	}
}

func paths(rs []fake.Request) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// TestOfficialCoverage fails when memoryd's client can make a request
// the SDK's is not compared with: every exported method of Client is in
// sdkOps or named here with why it is not.
func TestOfficialCoverage(t *testing.T) {
	not := map[string]string{
		"Close":  "makes no request",
		"Health": "GET /health (src/main.py health_check) has no SDK call; TestConformance checks it",
	}
	ms, err := clients.Methods(".", "Client")
	if err != nil || len(ms) == 0 {
		t.Fatalf("methods: %v %v", ms, err)
	}
	for _, m := range ms {
		name := strings.TrimPrefix(m, "Client.")
		if _, ok := sdkOps[name]; !ok && not[name] == "" {
			t.Errorf("%s performs requests the SDK's are not compared with: add it to TestOfficialSDK", m)
		}
	}
}
