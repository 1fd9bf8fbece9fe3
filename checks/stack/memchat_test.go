package stack

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	honchofake "wntrmute.dev/boxmaker/checks/fake/honcho"
	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/first"
)

// memRig is the whole stack behind gatewayd over the fake Mattermost,
// with channels A and B, a second heard user who is no approver, and
// memoryd's memchat.sock named in gatewayd.toml. projects, if any, are
// appended to memoryd.toml as bxctl up would first write it.
type memRig struct {
	*chatRig
	mallory mm.User
	a, b    string
	srv     *llama.Server
	state   string
	logs    func() string
}

func newMemRig(t *testing.T, projects func(a, b string) string) *memRig {
	t.Helper()
	bin := Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd", "gatewayd")
	state := ShortState(t)
	srv := llama.New(t, llama.Options{Slots: 2, NCtx: 65536})
	selftestReplies(srv)
	c := newChatRig(t)
	r := &memRig{chatRig: c, mallory: c.mm.AddUser("mallory", false), srv: srv, state: state}
	r.a = c.mm.AddChannel("O", "alpha", c.bot.ID, c.owner.ID, r.mallory.ID)
	r.b = c.mm.AddChannel("O", "beta", c.bot.ID, c.owner.ID, r.mallory.ID)
	preconfigure(t, state, srv)
	cfg := fmt.Sprintf("url = %q\ntoken = \"env:BOXMAKER_TEST_MM_TOKEN\"\n\n[allow]\nusers = [%q, %q]\nchannels = [%q, %q]\n\n[approvals]\nusers = [%q]\n",
		c.mm.URL(), c.owner.ID, r.mallory.ID, r.a, r.b, c.owner.ID)
	require.NoError(t, os.WriteFile(layout.ConfigPath(state, "gatewayd"), []byte(cfg), 0o600))
	if projects != nil {
		for _, fc := range first.Configs {
			if fc.Role == "memoryd" {
				require.NoError(t, os.WriteFile(fc.Path(state), []byte(fc.Text(first.Params{State: state})+projects(r.a, r.b)), 0o600))
			}
		}
	}
	u, _ := url.Parse(srv.URL())
	Up(t, bin, state, u.Host, c.tokenEnv())
	r.logs = func() string {
		var b strings.Builder
		for _, role := range []string{"gatewayd", "memoryd", "loopd"} {
			l, _ := os.ReadFile(filepath.Join(state, "logs", role+".log"))
			fmt.Fprintf(&b, "--- %s\n%s", role, l)
		}
		return b.String()
	}
	c.connected(t, 1, r.logs)
	return r
}

// post posts as user in channel (root "" starts a thread) and returns it.
func (r *memRig) post(t *testing.T, user mm.User, channel, root, msg string) mm.Post {
	t.Helper()
	p, err := r.mm.PostAs(user.ID, mm.Post{ChannelID: channel, RootID: root, Message: "@boxmaker " + msg})
	require.NoError(t, err)
	return p
}

// wait waits for the bot's n-th post in thread root and returns it.
func (r *memRig) wait(t *testing.T, root string, n int) string {
	t.Helper()
	for i := 0; i < 1500; i++ {
		if got := r.botPosts(root); len(got) >= n {
			return got[n-1].Message
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d bot posts in thread %s:\n%s", n, root, r.logs())
	return ""
}

// note starts a thread in channel whose turn writes text as a note.
func (r *memRig) note(t *testing.T, channel, text string) mm.Post {
	t.Helper()
	r.srv.Script(
		llama.Reply{Reasoning: "Note it.", ToolCalls: []llama.ToolCall{{Name: "memory", Arguments: fmt.Sprintf(`{"action":"note","text":%q}`, text)}}},
		llama.Reply{Reasoning: "Done.", Content: "Noted."},
	)
	p := r.post(t, r.owner, channel, "", "remember this: "+text)
	r.wait(t, p.ID, 1)
	return p
}

// recall runs a turn in thread root (a new thread of channel when root
// is "") that recalls query, and returns the recall's result as the
// session log holds it.
func (r *memRig) recall(t *testing.T, channel, root, query string) string {
	t.Helper()
	r.srv.Script(
		llama.Reply{Reasoning: "Search.", ToolCalls: []llama.ToolCall{{Name: "recall", Arguments: fmt.Sprintf(`{"query":%q,"k":5}`, query)}}},
		llama.Reply{Reasoning: "Answer.", Content: "Searched."},
	)
	thread, n := root, 0
	if root == "" {
		thread = r.post(t, r.owner, channel, "", "what do you know about "+query+"?").ID
	} else {
		n = len(r.botPosts(root))
		r.post(t, r.owner, channel, root, "what do you know about "+query+"?")
	}
	r.wait(t, thread, n+1)
	res := toolResults(t, r.state, "mm-"+thread)
	require.NotEmpty(t, res, "no tool result in mm-%s", thread)
	last := res[len(res)-1]
	require.Equal(t, "recall", last.Tool, show(res))
	return last.Content
}

// TestStackMemoryProjects is issue 30's projects over real processes:
// two projects over two channels (memoryd.toml's [[project]]), under the
// chosen design, with fleet memory on a fake Honcho: project alpha has
// a workspace pair of its own, beta none. A fact noted in a thread of
// alpha's channel is recalled in another thread of alpha, not in a
// thread of beta's channel, not in a direct message (a thread outside
// both); the session's baseline holds its channel, which gatewayd sent
// and loopd kept. In Honcho, alpha's turns are in alpha's pair only,
// beta's nowhere, the direct message's in the agent's pair, and only
// alpha's threads search alpha's pair.
func TestStackMemoryProjects(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	t.Parallel()
	hon := honchofake.New(t, honchofake.Options{})
	r := newMemRig(t, func(a, b string) string {
		return fmt.Sprintf("\n[honcho]\nurl = %q\npeer = \"agent\"\ntrusted_workspace = \"host1-trusted\"\nuntrusted_workspace = \"host1-untrusted\"\nread_bound_ms = 2000\n"+
			"\n[[project]]\nname = \"alpha\"\nchannels = [%q]\ntrust = \"trusted\"\ntrusted_workspace = \"alpha-trusted\"\nuntrusted_workspace = \"alpha-untrusted\"\n"+
			"\n[[project]]\nname = \"beta\"\nchannels = [%q]\n", hon.URL, a, b)
	})
	root := r.note(t, r.a, "The alpha boiler code is kestrel.")
	if res := toolResults(t, r.state, "mm-"+root.ID); len(res) != 1 || !strings.Contains(res[0].Content, "noted as n1") {
		t.Fatalf("the note: %s", show(res))
	}
	base := readFile(t, filepath.Join(r.state, "sessions", "mm-"+root.ID, "0.baseline.json"))
	require.Contains(t, base, `"channel":"`+r.a+`"`, "the session's baseline lacks its channel")

	// The note's turn reaches alpha's pair before the other threads ask.
	inHoncho := func(session string) map[string]int {
		ws := map[string]int{}
		for _, m := range hon.Messages() {
			if m.Session == session {
				ws[m.Workspace]++
			}
		}
		return ws
	}
	// (Trusted if brokerd's gate answered in time, else untrusted: under
	// load either is right; the agent's pair never is.)
	for i := 0; inHoncho("mm-" + root.ID)["alpha-trusted"]+inHoncho("mm-" + root.ID)["alpha-untrusted"] < 2; i++ {
		if i > 1500 {
			t.Fatalf("alpha's note turn never reached alpha's pair: %+v\n%s", hon.Messages(), r.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	searched := func(f func() string) (string, string) {
		n := len(hon.Requests())
		got := f()
		var paths []string
		for _, q := range hon.Requests()[n:] {
			if strings.HasSuffix(q.Path, "/search") {
				paths = append(paths, q.Path)
			}
		}
		return got, strings.Join(paths, " ")
	}

	got, paths := searched(func() string { return r.recall(t, r.a, "", "kestrel") })
	if !strings.Contains(got, "kestrel") || !strings.Contains(got, "(project alpha)") || !strings.Contains(paths, "/alpha-trusted/search") {
		t.Errorf("recall in another thread of project alpha (searched %s):\n%s", paths, got)
	}
	got, paths = searched(func() string { return r.recall(t, r.b, "", "kestrel") })
	if strings.Contains(got, "kestrel.") || !strings.Contains(got, ": 0 hits") || strings.Contains(paths, "alpha-") {
		t.Errorf("recall in project beta's thread found alpha's note or searched alpha's pair (%s):\n%s", paths, got)
	}
	got, paths = searched(func() string { return r.recall(t, r.dm, "", "kestrel") })
	if strings.Contains(got, "kestrel.") || !strings.Contains(got, ": 0 hits") || strings.Contains(paths, "alpha-") || !strings.Contains(paths, "/host1-trusted/search") {
		t.Errorf("recall in a thread outside both projects found alpha's note or searched alpha's pair (%s):\n%s", paths, got)
	}
	// Every filed turn is where its thread's project puts it.
	for i := 0; len(hon.Messages()) < 6; i++ {
		if i > 1500 {
			t.Fatalf("Honcho holds %d messages, want 6 (alpha's two turns and the direct message's):\n%+v", len(hon.Messages()), hon.Messages())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // anything filed late would show now
	for _, m := range hon.Messages() {
		if !strings.HasPrefix(m.Workspace, "alpha-") && !strings.HasPrefix(m.Workspace, "host1-") {
			t.Errorf("Honcho holds a message in %s: %+v", m.Workspace, m)
		}
		if strings.Contains(m.Content, "kestrel") && strings.HasPrefix(m.Workspace, "host1-") && !strings.Contains(m.Content, "what do you know") {
			t.Errorf("alpha's fact is in the agent's workspace: %+v", m)
		}
	}
	if len(hon.Messages()) != 6 {
		t.Errorf("Honcho holds %d messages, want 6 (beta's thread files nothing): %+v", len(hon.Messages()), hon.Messages())
	}
}

// TestStackMemoryChatCommands is issue 30's `!why` and `!forget` in the
// chat over real processes: the owner's `!why ID` is answered in the
// thread with the chain; a non-owner's `!why` and `!forget` are ignored
// (logged, no answer, nothing forgotten); the owner's `!forget ID` is
// answered with a code, `!forget ID CODE` forgets, and recall stops
// returning the note; the journal's tombstone names the chat.
func TestStackMemoryChatCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	t.Parallel()
	r := newMemRig(t, nil)
	root := r.note(t, r.a, "The boiler code is heron.")
	if got := r.recall(t, r.a, root.ID, "heron"); !strings.Contains(got, "from=note n1") {
		t.Fatalf("recall before the forget does not find n1:\n%s", got)
	}
	n := len(r.botPosts(root.ID))

	r.post(t, r.owner, r.a, root.ID, "!why n1")
	why := r.wait(t, root.ID, n+1)
	for _, want := range []string{"Why n1:", "note n1: kind note", "The boiler code is heron.", "session mm-" + root.ID, "bxctl memory why n1"} {
		if !strings.Contains(why, want) {
			t.Errorf("!why n1 lacks %q:\n%s", want, why)
		}
	}

	r.post(t, r.mallory, r.a, root.ID, "!forget n1")
	r.post(t, r.mallory, r.a, root.ID, "!why n1")
	for i := 0; strings.Count(readFile(t, filepath.Join(r.state, "logs", "gatewayd.log")), "memory command ignored: the user is not an approver") < 2; i++ {
		if i > 1500 {
			t.Fatalf("mallory's commands were not logged as ignored:\n%s", r.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}

	r.post(t, r.owner, r.a, root.ID, "!forget n1")
	ask := r.wait(t, root.ID, n+2)
	m := regexp.MustCompile("`!forget n1 ([0-9a-z]{6})`").FindStringSubmatch(ask)
	if m == nil || !strings.Contains(ask, "The boiler code is heron.") {
		t.Fatalf("the owner's !forget n1 was answered (mallory's must not be):\n%s", ask)
	}
	r.post(t, r.owner, r.a, root.ID, "!forget n1 "+m[1])
	receipt := r.wait(t, root.ID, n+3)
	if !strings.Contains(receipt, "Receipt: forgot n1: tombstone n2") {
		t.Fatalf("the receipt:\n%s", receipt)
	}
	if got := len(r.botPosts(root.ID)); got != n+3 {
		t.Errorf("the thread has %d bot posts, want %d: a non-owner's command was answered", got, n+3)
	}
	if got := r.recall(t, r.a, root.ID, "heron"); strings.Contains(got, "from=note n1") {
		t.Errorf("recall after the forget still returns n1:\n%s", got)
	}
	notes := readFile(t, filepath.Join(r.state, "memory", "notes.md"))
	if !strings.Contains(notes, "asked in the chat by Mattermost user "+r.owner.ID) {
		t.Errorf("the tombstone does not name the chat:\n%s", notes)
	}
}
