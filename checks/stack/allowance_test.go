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
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestStackSessionAllowance (issue 26) runs the real stack against the
// fake Mattermost and the real runner (Podman): under an ask grant the
// model reads the same file twice; the owner answers the first
// `!approve ID CODE session`; the second runs in a container with no
// approval post and its audit record names the allowance; a read of
// another file asks again; `!revoke ID` in the thread ends the
// allowance, and the same file asks again in the next turn.
func TestStackSessionAllowance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	svc := podmantest.Require(t)
	shareWithBrokerd(t, svc.Socket)
	image := svc.ToolImage(t)
	bin := Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd", "gatewayd")
	state := ShortState(t)
	files := roletest.Readable(t)
	require.NoError(t, os.WriteFile(filepath.Join(files, "a.txt"), []byte("alpha 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(files, "b.txt"), []byte("beta 2\n"), 0o644))
	read := func(name string) llama.Reply {
		return llama.Reply{Reasoning: "Read.", ToolCalls: []llama.ToolCall{{Name: "call_tool",
			Arguments: fmt.Sprintf(`{"name":"read_file","arguments":{"path":%q}}`, filepath.Join(files, name))}}}
	}
	srv := llama.New(t, llama.Options{Slots: 2, NCtx: 65536})
	srv.Script(
		llama.Reply{Reasoning: "The time.", ToolCalls: []llama.ToolCall{{Name: "clock", Arguments: `{}`}}},
		llama.Reply{Reasoning: "Greet.", Content: "Hello."},
		llama.Reply{Reasoning: "Again.", Content: "Hello again."},
		// Turn 1: a.txt (asks), a.txt (the allowance), b.txt (asks).
		read("a.txt"), read("a.txt"), read("b.txt"),
		llama.Reply{Reasoning: "Done.", Content: "Read them."},
		// Turn 2, after !revoke: a.txt asks again.
		read("a.txt"),
		llama.Reply{Reasoning: "Done.", Content: "Read it again."},
		// Turn 3, after the grant file changed: a.txt asks again.
		read("a.txt"),
		llama.Reply{Reasoning: "Done.", Content: "Read it a third time."},
		// Turn 4, after bxctl grants apply: a.txt runs without asking.
		read("a.txt"),
		llama.Reply{Reasoning: "Done.", Content: "Read it a fourth time."},
	)
	fmm := mm.New(t)
	bot := fmm.AddUser("boxmaker", true)
	owner := fmm.AddUser("owner", false)
	dm := fmm.Direct(bot.ID, owner.ID)
	u, _ := url.Parse(srv.URL())
	for _, d := range []string{filepath.Join(state, "config"), filepath.Join(state, "grants")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(state, name), []byte(body), 0o600))
	}
	write("config/inferproxy.toml", fmt.Sprintf("socket_dir = %q\nupstream = %q\naccepts_per_sec = 1000\naccept_burst = 1000\n", filepath.Join(state, "run", "infer"), u.Host))
	write("grants/files.toml", fmt.Sprintf("[[grant]]\nid = \"files-ask\"\ntool = \"read_file\"\npaths = [%q]\nmax_taint = \"secret\"\nuntrusted = false\nmode = \"ask\"\n", files))
	write("config/brokerd.toml", fmt.Sprintf("state_dir = %q\ngrants_dir = %q\nbroker_socket_dir = %q\nadmin_socket_dir = %q\ngateway_socket = %q\n\n[runner]\npodman_socket = %q\ntool_image = %q\n",
		state, filepath.Join(state, "grants"), filepath.Join(state, "run", "broker"), filepath.Join(state, "run", "admin"),
		layout.Socket(state, &wire.Gateway), svc.Socket, image))
	write("config/gatewayd.toml", fmt.Sprintf("url = %q\ntoken = \"env:BOXMAKER_TEST_MM_TOKEN\"\nstate_dir = %q\nloop_socket = %q\nsocket_dir = %q\n\n[allow]\nusers = [%q]\n\n[approvals]\nusers = [%q]\n",
		fmm.URL(), state, layout.Socket(state, &wire.Loop), filepath.Join(state, "run", "gateway"), owner.ID, owner.ID))
	Up(t, bin, state, u.Host, []string{"BOXMAKER_TEST_MM_TOKEN=" + bot.Token})
	logs := func() string {
		var b strings.Builder
		for _, r := range []string{"gatewayd", "brokerd"} {
			d, _ := os.ReadFile(filepath.Join(state, "logs", r+".log"))
			b.Write(d)
		}
		return b.String()
	}
	waitFor(t, "gatewayd's WebSocket", 20*time.Second, func() bool { return fmm.Connections() > 0 })
	botPosts := func(root string) []mm.Post {
		var got []mm.Post
		for _, p := range fmm.Thread(root) {
			if p.UserID == bot.ID {
				got = append(got, p)
			}
		}
		return got
	}
	approvalRE := regexp.MustCompile(`\*\*Approval (\d+)\*\*, part 1 of 1`)
	approvals := func(root string) []mm.Post {
		var out []mm.Post
		for _, p := range botPosts(root) {
			if approvalRE.MatchString(p.Message) {
				out = append(out, p)
			}
		}
		return out
	}
	// waitApproval waits for the n-th approval post (an answered one is
	// edited, so ids seen are remembered) and returns its id and code.
	seen := map[string]string{} // approval id → its post's text
	var order []string
	count := func(root string) int {
		for _, p := range approvals(root) {
			id := approvalRE.FindStringSubmatch(p.Message)[1]
			if _, ok := seen[id]; !ok {
				seen[id] = p.Message
				order = append(order, id)
			}
		}
		return len(order)
	}
	waitApproval := func(root string, n int) (string, string) {
		t.Helper()
		for start := time.Now(); count(root) < n; time.Sleep(50 * time.Millisecond) {
			if time.Since(start) > 60*time.Second {
				var m []string
				for _, p := range fmm.Thread(root) {
					m = append(m, p.UserID+": "+p.Message)
				}
				session, _ := os.ReadFile(filepath.Join(state, "sessions", "mm-"+root, "0.jsonl"))
				t.Fatalf("no approval post %d; thread:\n%s\nsession:\n%s\nlogs:\n%s\naudit:\n%s", n, strings.Join(m, "\n"), session, logs(), readAuditLog(t, state))
			}
		}
		id := order[n-1]
		cm := regexp.MustCompile("`!approve " + id + " ([0-9a-z]{6})`").FindStringSubmatch(seen[id])
		if cm == nil {
			t.Fatalf("approval post shows no code: %q", seen[id])
		}
		return id, cm[1]
	}
	say := func(root, msg string) {
		_, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: dm, RootID: root, Message: msg})
		require.NoError(t, err)
	}
	lastSays := func(root, want string) func() bool {
		return func() bool {
			p := botPosts(root)
			return len(p) > 0 && strings.Contains(p[len(p)-1].Message, want)
		}
	}

	root, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: dm, Message: "read my files"})
	require.NoError(t, err)
	id, code := waitApproval(root.ID, 1)
	first := seen[id]
	if !strings.Contains(first, "`!approve "+id+" "+code+" session`: runs it, and from now on runs without asking read\\_file of exactly "+filepath.Join(files, "a.txt")) {
		t.Errorf("the approval post does not say what `session` does:\n%s", first)
	}
	say(root.ID, "!approve "+id+" "+code+" session")
	// The second read runs under the allowance; the third (b.txt) asks.
	id2, code2 := waitApproval(root.ID, 2)
	if p := seen[id2]; !strings.Contains(p, "b.txt") {
		t.Fatalf("the second approval is not for b.txt:\n%s", p)
	}
	say(root.ID, "!deny "+id2+" "+code2+" not that one")
	waitFor(t, "the turn's answer", 60*time.Second, lastSays(root.ID, "Read them."))
	if n := count(root.ID); n != 2 {
		t.Errorf("%d approval posts, want 2 (a.txt once, b.txt)", n)
	}
	if !strings.Contains(strings.Join(func() []string {
		var m []string
		for _, p := range botPosts(root.ID) {
			m = append(m, p.Message)
		}
		return m
	}(), "\n"), "session allowance "+id+" made") {
		t.Errorf("no reply in the thread says the allowance was made:\n%s", logs())
	}
	audit := readAuditLog(t, state)
	if !regexp.MustCompile(`"tool":"read_file","arguments":\{"path":"` + regexp.QuoteMeta(filepath.Join(files, "a.txt")) + `"\},"outcome":"allowed",[^\n]*"allowance":` + id + `\}\}`).MatchString(audit) {
		t.Errorf("no allowed decision of a.txt names allowance %s:\n%s", id, audit)
	}
	if !strings.Contains(audit, `"type":"allowance","seq":`) || !strings.Contains(audit, `"approver":"mattermost:`+owner.ID+`"`) {
		t.Errorf("the audit log lacks the allowance record:\n%s", audit)
	}
	session, _ := os.ReadFile(filepath.Join(state, "sessions", "mm-"+root.ID, "0.jsonl"))
	if strings.Count(string(session), "alpha 1") < 2 {
		t.Errorf("a.txt was not read twice in containers:\n%s", session)
	}

	// !revoke ends it; the same file asks again.
	say(root.ID, "!revoke "+id)
	waitFor(t, "the revocation reply", 30*time.Second, lastSays(root.ID, "session allowance "+id+" revoked"))
	say(root.ID, "@boxmaker read a again")
	id3, code3 := waitApproval(root.ID, 3)
	say(root.ID, "!approve "+id3+" "+code3+" session")
	waitFor(t, "the second turn's answer", 60*time.Second, lastSays(root.ID, "Read it again."))

	// A change to the grant the new allowance rode on ends it.
	write("grants/files.toml", fmt.Sprintf("[[grant]]\nid = \"files-ask\"\ntool = \"read_file\"\npaths = [%q]\nmax_taint = \"secret\"\nuntrusted = true\nmode = \"ask\"\n", files))
	require.NoError(t, os.Chmod(filepath.Join(state, "grants", "files.toml"), 0o640))
	say(root.ID, "@boxmaker read a once more")
	id4, code4 := waitApproval(root.ID, 4)
	grantsBefore, _ := os.ReadFile(filepath.Join(state, "grants", "files.toml"))
	say(root.ID, "!approve "+id4+" "+code4+" always")
	waitFor(t, "the third turn's answer", 60*time.Second, lastSays(root.ID, "Read it a third time."))

	// always: a proposal appears, grants/ is unchanged, bxctl grants
	// apply writes an owner-owned grant brokerd's loader accepts, and the
	// next identical call runs with no post.
	prop, err := os.ReadFile(filepath.Join(state, "proposals", id4+".toml"))
	require.NoError(t, err, "no proposal in proposals/")
	if !strings.Contains(string(prop), "standing = true") || !strings.Contains(string(prop), "approval "+id4) {
		t.Errorf("proposal:\n%s", prop)
	}
	if after, _ := os.ReadFile(filepath.Join(state, "grants", "files.toml")); string(after) != string(grantsBefore) {
		t.Error("grants/ changed before apply")
	}
	if entries, _ := os.ReadDir(filepath.Join(state, "grants")); len(entries) != 1 {
		t.Errorf("grants/ holds %d entries before apply, want 1", len(entries))
	}
	if out, err := bxctl(t, bin, "grants", "apply", "--state", state, id4); err != nil || !strings.Contains(out, "applied:") {
		t.Fatalf("bxctl grants apply %s: %v\n%s", id4, err, out)
	}
	if out, err := bxctl(t, bin, "grants", "check", filepath.Join(state, "grants")); err != nil {
		t.Errorf("bxctl grants check after apply: %v\n%s", err, out)
	}
	say(root.ID, "@boxmaker read a a fourth time")
	waitFor(t, "the fourth turn's answer", 60*time.Second, lastSays(root.ID, "Read it a fourth time."))
	if n := count(root.ID); n != 4 {
		t.Errorf("%d approvals after the standing grant, want still 4", n)
	}
	if audit := readAuditLog(t, state); !strings.Contains(audit, `"allowance":`+id3+`,"reason":"grant_changed"`) {
		t.Errorf("the audit log lacks the end of allowance %s by the grant's change:\n%s", id3, audit)
	}
	if audit := readAuditLog(t, state); !strings.Contains(audit, `"allowance":`+id+`,"reason":"revoked","by":"mattermost:`+owner.ID+`"`) {
		t.Errorf("the audit log lacks the revocation:\n%s", audit)
	}
	if out, err := bxctl(t, bin, "audit", "verify", filepath.Join(state, "broker", "audit")); err != nil {
		t.Errorf("bxctl audit verify: %v %s", err, out)
	}
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
