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
	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/checks/roletest"
)

// allowRig is the stack of the session-allowance tests (issue 26): the
// real roles over the fake Mattermost and the real runner (Podman), an
// ask grant ("files-ask") over a directory holding a.txt and b.txt, and
// the owner's DM with the bot. The owner is the one approver.
type allowRig struct {
	t                 *testing.T
	bin, state, files string
	srv               *llama.Server
	fmm               *mm.Server
	bot, owner        mm.User
	dm                string
	seen              map[string]string // approval id → its post's text
	order             []string          // approval ids, as first seen
}

var approvalRE = regexp.MustCompile(`\*\*Approval (\d+)\*\*, part 1 of 1`)

// newAllowRig writes the configs (brokerd's with the test's Podman
// service, files-ask and any extra grant files) and scripts the model's
// self-test; [allowRig.up] starts the stack.
func newAllowRig(t *testing.T, extra map[string]string) *allowRig {
	t.Helper()
	svc := podmantest.Require(t)
	shareWithBrokerd(t, svc.Socket)
	image := svc.ToolImage(t)
	r := &allowRig{t: t, seen: map[string]string{}}
	r.bin = Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd", "gatewayd")
	r.state = ShortState(t)
	r.files = roletest.Readable(t)
	require.NoError(t, os.WriteFile(filepath.Join(r.files, "a.txt"), []byte("alpha 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(r.files, "b.txt"), []byte("beta 2\n"), 0o644))
	r.srv = llama.New(t, llama.Options{Slots: 2, NCtx: 65536})
	selftestReplies(r.srv)
	r.fmm = mm.New(t)
	r.bot = r.fmm.AddUser("boxmaker", true)
	r.owner = r.fmm.AddUser("owner", false)
	r.dm = r.fmm.Direct(r.bot.ID, r.owner.ID)
	u, _ := url.Parse(r.srv.URL())
	for _, d := range []string{filepath.Join(r.state, "config"), filepath.Join(r.state, "grants")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	r.write("config/inferproxy.toml", fmt.Sprintf("upstream = %q\naccepts_per_sec = 1000\naccept_burst = 1000\n", u.Host))
	r.write("grants/files.toml", r.filesGrant(false))
	for name, body := range extra {
		r.write(name, body)
	}
	r.write("config/brokerd.toml", fmt.Sprintf("[runner]\npodman_socket = %q\ntool_image = %q\n", svc.Socket, image))
	r.write("config/gatewayd.toml", fmt.Sprintf("url = %q\ntoken = \"env:BOXMAKER_TEST_MM_TOKEN\"\n\n[allow]\nusers = [%q]\n\n[approvals]\nusers = [%q]\n",
		r.fmm.URL(), r.owner.ID, r.owner.ID))
	return r
}

// filesGrant is files-ask's text; untrusted changes its bytes (and so
// its hash) for the grant-change case.
func (r *allowRig) filesGrant(untrusted bool) string {
	return fmt.Sprintf("[[grant]]\nid = \"files-ask\"\ntool = \"read_file\"\npaths = [%q]\nmax_taint = \"secret\"\nuntrusted = %t\nmode = \"ask\"\n", r.files, untrusted)
}

// write writes a file under the state directory, mode 0600.
func (r *allowRig) write(name, body string) {
	require.NoError(r.t, os.WriteFile(filepath.Join(r.state, name), []byte(body), 0o600))
}

// up starts the stack and waits for gatewayd's WebSocket.
func (r *allowRig) up() {
	r.t.Helper()
	u, _ := url.Parse(r.srv.URL())
	Up(r.t, r.bin, r.state, u.Host, []string{"BOXMAKER_TEST_MM_TOKEN=" + r.bot.Token})
	waitFor(r.t, "gatewayd's WebSocket", 20*time.Second, func() bool { return r.fmm.Connections() > 0 })
}

// read is the model's read_file of a file in files.
func (r *allowRig) read(name string) llama.Reply {
	return llama.Reply{Reasoning: "Read.", ToolCalls: []llama.ToolCall{{Name: "call_tool",
		Arguments: fmt.Sprintf(`{"name":"read_file","arguments":{"path":%q}}`, filepath.Join(r.files, name))}}}
}

// done is the model's last reply of a turn.
func done(answer string) llama.Reply { return llama.Reply{Reasoning: "Done.", Content: answer} }

// logs are gatewayd's and brokerd's logs, for failures.
func (r *allowRig) logs() string {
	var b strings.Builder
	for _, role := range []string{"gatewayd", "brokerd"} {
		d, _ := os.ReadFile(filepath.Join(r.state, "logs", role+".log"))
		b.Write(d)
	}
	return b.String()
}

// botPosts are the bot's posts in thread root.
func (r *allowRig) botPosts(root string) []mm.Post {
	var got []mm.Post
	for _, p := range r.fmm.Thread(root) {
		if p.UserID == r.bot.ID {
			got = append(got, p)
		}
	}
	return got
}

// botSaid is every bot post of thread root, one per line.
func (r *allowRig) botSaid(root string) string {
	var m []string
	for _, p := range r.botPosts(root) {
		m = append(m, p.Message)
	}
	return strings.Join(m, "\n")
}

// count is how many approval posts thread root has had (an answered
// one is edited, so the ids seen are remembered).
func (r *allowRig) count(root string) int {
	for _, p := range r.botPosts(root) {
		m := approvalRE.FindStringSubmatch(p.Message)
		if m == nil {
			continue
		}
		if _, ok := r.seen[m[1]]; !ok {
			r.seen[m[1]] = p.Message
			r.order = append(r.order, m[1])
		}
	}
	return len(r.order)
}

// waitApproval waits for the n-th approval post of thread root and
// returns its id and code.
func (r *allowRig) waitApproval(root string, n int) (string, string) {
	r.t.Helper()
	for start := time.Now(); r.count(root) < n; time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 60*time.Second {
			var m []string
			for _, p := range r.fmm.Thread(root) {
				m = append(m, p.UserID+": "+p.Message)
			}
			session, _ := os.ReadFile(filepath.Join(r.state, "sessions", "mm-"+root, "0.jsonl"))
			r.t.Fatalf("no approval post %d; thread:\n%s\nsession:\n%s\nlogs:\n%s\naudit:\n%s", n, strings.Join(m, "\n"), session, r.logs(), readAuditLog(r.t, r.state))
		}
	}
	id := r.order[n-1]
	cm := regexp.MustCompile("`!approve " + id + " ([0-9a-z]{6})`").FindStringSubmatch(r.seen[id])
	if cm == nil {
		r.t.Fatalf("approval post shows no code: %q", r.seen[id])
	}
	return id, cm[1]
}

// say posts msg as the owner, in thread root (a new thread if "").
func (r *allowRig) say(root, msg string) string {
	r.t.Helper()
	p, err := r.fmm.PostAs(r.owner.ID, mm.Post{ChannelID: r.dm, RootID: root, Message: msg})
	require.NoError(r.t, err)
	return p.ID
}

// waitLast waits until the bot's last post in thread root says want.
func (r *allowRig) waitLast(root, want string) {
	r.t.Helper()
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if p := r.botPosts(root); len(p) > 0 && strings.Contains(p[len(p)-1].Message, want) {
			return
		}
		if time.Now().After(end) {
			r.t.Fatalf("the bot's last post in the thread never said %q; thread:\n%s\nlogs:\n%s", want, r.botSaid(root), r.logs())
		}
	}
}

// decidedBy is how many allowed read_file decisions of name in the
// audit log allowance id made.
func (r *allowRig) decidedBy(name, id string) int {
	return len(regexp.MustCompile(`"tool":"read_file","arguments":\{"path":"`+regexp.QuoteMeta(filepath.Join(r.files, name))+
		`"\},"outcome":"allowed",[^\n]*"allowance":`+id+`\}\}`).FindAllString(readAuditLog(r.t, r.state), -1))
}

func readAuditLog(t *testing.T, state string) string {
	t.Helper()
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(state, "broker", "audit", "*.jsonl"))
	for _, f := range files {
		d, _ := os.ReadFile(f)
		b.Write(d)
	}
	return b.String()
}
