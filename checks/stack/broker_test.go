package stack

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
)

const stackGrants = `
[[grant]]
id = "downloads-read"
tool = "read_file"
paths = ["/home/owner/Downloads"]
max_taint = "secret"
mode = "ask"
`

func bxctl(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "bxctl"), args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestStackApproval is the authority path end to end, over real sockets
// and real processes: a chat turn's tool call reaches brokerd, an ask
// grant parks it, `bxctl approvals` shows it as brokerd holds it, `bxctl
// approve ID` answers it, brokerd re-decides and hands it to the runner
// (which refuses: tool containers come later), the turn goes on to its
// answer, and `bxctl audit verify` finds an intact chain with the
// decision and the approval.
func TestStackApproval(t *testing.T) {
	t.Parallel()
	bin, state, srv := stack(t, 65536)
	require.NoError(t, os.MkdirAll(filepath.Join(state, "grants"), 0o700))
	os.WriteFile(filepath.Join(state, "grants", "downloads.toml"), []byte(stackGrants), 0o600)
	srv.Script(
		fake.Reply{Reasoning: "Read it.", ToolCalls: []fake.ToolCall{{Name: "call_tool", Arguments: `{"name":"read_file","arguments":{"path":"/home/owner/Downloads/report.pdf"}}`}}},
		fake.Reply{Reasoning: "It could not run.", Content: "I could not read the report."},
	)
	up(t, bin, state, srv)
	chatCmd := exec.Command(filepath.Join(bin, "bxctl"), "chat", "--state", state, "--session", "s1", "--message", "read my report", "--json")
	var chatOut bytes.Buffer
	chatCmd.Stdout, chatCmd.Stderr = &chatOut, &chatOut
	require.NoError(t, chatCmd.Start())
	var list string
	for i := 0; ; i++ {
		out, err := bxctl(t, bin, "approvals", "--state", state)
		if err != nil {
			t.Fatalf("bxctl approvals: %v\n%s", err, out)
		}
		if strings.Contains(out, "approval ") {
			list = out
			break
		}
		if i > 500 {
			t.Fatalf("no approval appeared; chat: %s", chatOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	id := regexp.MustCompile(`approval (\d+): read_file in session s1`).FindStringSubmatch(list)
	if id == nil || !strings.Contains(list, `{"path":"/home/owner/Downloads/report.pdf"}`) {
		t.Fatalf("bxctl approvals = %q", list)
	}
	code := regexp.MustCompile(`approval ` + id[1] + `: .*, code ([0-9a-z]{6})`).FindStringSubmatch(list)
	if code == nil {
		t.Fatalf("bxctl approvals shows no code: %q", list)
	}
	if out, err := bxctl(t, bin, "approve", "--state", state, id[1], code[1]); err != nil || !strings.Contains(out, "approval "+id[1]+": approved") {
		t.Fatalf("bxctl approve: %v %s", err, out)
	}
	if err := chatCmd.Wait(); err != nil {
		t.Fatalf("bxctl chat: %v\n%s", err, chatOut.String())
	}
	for _, want := range []string{`"type":"approval_pending"`, `"id":` + id[1], `"type":"answer"`, "I could not read the report."} {
		if !strings.Contains(chatOut.String(), want) {
			t.Errorf("chat events lack %s:\n%s", want, chatOut.String())
		}
	}
	log, _ := os.ReadFile(filepath.Join(state, "sessions", "s1", "0.jsonl"))
	if !strings.Contains(string(log), "tool containers are not configured") || !strings.Contains(string(log), `"status":"error"`) {
		t.Errorf("session log lacks the runner's refusal:\n%s", log)
	}
	out, err := bxctl(t, bin, "audit", "verify", filepath.Join(state, "broker", "audit"))
	if err != nil || !strings.Contains(out, "2 records") {
		t.Errorf("bxctl audit verify: %v %s; want an intact chain of the decision and the approval", err, out)
	}
}
