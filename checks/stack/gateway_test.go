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

	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
)

const gatewayGrants = `
[[grant]]
id = "downloads-read"
tool = "read_file"
paths = ["/home/owner/Downloads"]
max_taint = "secret"
mode = "ask"
`

// TestStackGateway runs the real stack (bxctl up with loopd, inferproxy,
// brokerd and gatewayd) against the fake llama-server and the fake
// Mattermost: the owner DMs the bot and gets an answer in the thread; in
// an allowlisted channel a tool call under an ask grant posts an
// approval in the thread; a user who may talk but not approve sends
// !approve and is ignored and logged; the owner's !approve reaches
// brokerd, which records the approver, re-decides and hands the call to
// the runner (which refuses: tool containers come later); the turn goes
// on to its answer in the thread.
func TestStackGateway(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	bin := Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd", "gatewayd")
	state := ShortState(t)

	srv := llama.New(t, llama.Options{Slots: 2, NCtx: 65536})
	srv.Script(
		llama.Reply{Reasoning: "The time.", ToolCalls: []llama.ToolCall{{Name: "clock", Arguments: `{}`}}},
		llama.Reply{Reasoning: "Greet.", Content: "Hello."},
		llama.Reply{Reasoning: "Again.", Content: "Hello again."},
		// The DM.
		llama.Reply{Reasoning: "Greet the owner.", Content: "Hello, @channel! ![x](https://evil.example/p.png)"},
		// The channel thread.
		llama.Reply{Reasoning: "Read it.", ToolCalls: []llama.ToolCall{{Name: "call_tool", Arguments: `{"name":"read_file","arguments":{"path":"/home/owner/Downloads/report.pdf"}}`}}},
		llama.Reply{Reasoning: "It could not run.", Content: "I could not read the report."},
	)
	fmm := mm.New(t)
	bot := fmm.AddUser("boxmaker", true)
	owner := fmm.AddUser("owner", false)
	mallory := fmm.AddUser("mallory", false)
	eve := fmm.AddUser("eve", false) // in the channel, not in allow.users
	channel := fmm.AddChannel("O", "town-square", bot.ID, owner.ID, mallory.ID, eve.ID)
	dm := fmm.Direct(bot.ID, owner.ID)

	u, _ := url.Parse(srv.URL())
	for _, d := range []string{filepath.Join(state, "config"), filepath.Join(state, "grants")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(state, name), []byte(body), 0o600))
	}
	write("config/inferproxy.toml", fmt.Sprintf("upstream = %q\naccepts_per_sec = 1000\naccept_burst = 1000\n", u.Host))
	write("grants/downloads.toml", gatewayGrants)
	write("config/gatewayd.toml", fmt.Sprintf(`url = %q
token = "env:BOXMAKER_TEST_MM_TOKEN"

[allow]
users = [%q, %q]
channels = [%q]

[approvals]
users = [%q]
`, fmm.URL(), owner.ID, mallory.ID, channel, owner.ID))

	Up(t, bin, state, u.Host, []string{"BOXMAKER_TEST_MM_TOKEN=" + bot.Token})
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(state, "logs", "gatewayd.log"))
		return string(b)
	}
	waitBot := func(root string, n int, what string) []mm.Post {
		t.Helper()
		for i := 0; i < 1500; i++ {
			var got []mm.Post
			for _, p := range fmm.Thread(root) {
				if p.UserID == bot.ID {
					got = append(got, p)
				}
			}
			if len(got) >= n {
				return got
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no %s in thread %s; thread: %+v\ngatewayd log:\n%s", what, root, fmm.Thread(root), logs())
		return nil
	}
	// Wait for gatewayd's WebSocket before posting.
	for i := 0; fmm.Connections() == 0; i++ {
		if i > 500 {
			t.Fatalf("gatewayd never connected:\n%s", logs())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// 1. A DM, answered in its thread, escaped.
	hello, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: dm, Message: "hello"})
	require.NoError(t, err)
	ans := waitBot(hello.ID, 1, "answer")[0]
	if ans.RootID != hello.ID || !strings.Contains(ans.Message, "Hello, \uff20channel!") || strings.Contains(ans.Message, "@") ||
		!strings.Contains(ans.Message, `!\[x]\(https[:]//evil.example/p.png)`) || ans.Props["unsafe_links"] != "true" {
		t.Errorf("DM answer = %q, props %v", ans.Message, ans.Props)
	}

	// 2. A tool call in a channel thread posts an approval there.
	ask, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: channel, Message: "@boxmaker read my report"})
	require.NoError(t, err)
	appr := waitBot(ask.ID, 1, "approval")[0]
	m := regexp.MustCompile(`\*\*Approval (\d+)\*\*, part 1 of 1: a call to ` + "` read_file `").FindStringSubmatch(appr.Message)
	if m == nil || !strings.Contains(appr.Message, `{"path":"/home/owner/Downloads/report.pdf"}`) {
		t.Fatalf("approval post = %q", appr.Message)
	}
	id := m[1]
	cm := regexp.MustCompile("`!approve " + id + " ([0-9a-z]{6})`").FindStringSubmatch(appr.Message)
	if cm == nil {
		t.Fatalf("approval post shows no code: %q", appr.Message)
	}
	code := cm[1]

	// 3. Someone who may talk but not approve: ignored and logged.
	if _, err := fmm.PostAs(mallory.ID, mm.Post{ChannelID: channel, RootID: ask.ID, Message: "!approve " + id}); err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(logs(), "the user is not an approver"); i++ {
		if i > 500 {
			t.Fatalf("the non-approver's command was not logged:\n%s", logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs(), mallory.ID) {
		t.Errorf("the log does not name the non-approver:\n%s", logs())
	}

	// 3b. Someone who is not heard at all: ignored and recorded at Warn.
	if _, err := fmm.PostAs(eve.ID, mm.Post{ChannelID: channel, RootID: ask.ID, Message: "@boxmaker !approve " + id}); err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(logs(), "the post is not heard"); i++ {
		if i > 500 {
			t.Fatalf("the stranger's command was not recorded:\n%s", logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs(), eve.ID) {
		t.Errorf("the log does not name the stranger:\n%s", logs())
	}

	// 3c. The owner answers with the id alone, as a post imitating the
	// approval would ask: refused in the thread, nothing answered.
	if _, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: channel, RootID: ask.ID, Message: "@boxmaker !approve " + id}); err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(logs(), "wrong or missing code"); i++ {
		if i > 500 {
			t.Fatalf("the answer without a code was not refused:\n%s", logs())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// 4. The owner approves; the call reaches the runner; the turn answers.
	if _, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: channel, RootID: ask.ID, Message: "@boxmaker !approve " + id + " " + code}); err != nil {
		t.Fatal(err)
	}
	var final mm.Post
	for i := 0; ; i++ {
		posts := waitBot(ask.ID, 1, "answer")
		if last := posts[len(posts)-1]; strings.Contains(last.Message, "I could not read the report.") {
			final = last
			break
		}
		if i > 1000 {
			t.Fatalf("no final answer; thread: %+v\n%s", fmm.Thread(ask.ID), logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if final.RootID != ask.ID {
		t.Errorf("final answer not in the thread: %+v", final)
	}
	for _, p := range fmm.Thread(ask.ID) {
		if p.ID == appr.ID && !strings.Contains(p.Message, "approved by an approver") {
			t.Errorf("approval post not marked answered: %q", p.Message)
		}
	}
	session, _ := os.ReadFile(filepath.Join(state, "sessions", "mm-"+ask.ID, "0.jsonl"))
	if !strings.Contains(string(session), "tool containers are not configured") {
		t.Errorf("session log lacks the runner's refusal:\n%s", session)
	}
	var audit []byte
	files, _ := filepath.Glob(filepath.Join(state, "broker", "audit", "*.jsonl"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		audit = append(audit, b...)
	}
	if !strings.Contains(string(audit), `"approver":"mattermost:`+owner.ID+`"`) {
		t.Errorf("audit log lacks the approver:\n%s", audit)
	}
	if strings.Contains(logs(), bot.Token) {
		t.Error("the bot token is in gatewayd's log")
	}
	// The code never reached loopd: not in any file of the state
	// directory (session logs, audit), nor in what the model was sent.
	filepath.WalkDir(state, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), code) {
				t.Errorf("%s holds the approval code %q", path, code)
			}
		}
		return nil
	})
	for slot := range 2 {
		for _, req := range srv.Requests(slot) {
			if strings.Contains(string(req), code) {
				t.Errorf("the model was sent the approval code %q", code)
			}
		}
	}
}
