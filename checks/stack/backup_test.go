package stack

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	honchofake "wntrmute.dev/boxmaker/checks/fake/honcho"
	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	session "wntrmute.dev/boxmaker/pkg/logs/sessionlog"
)

// recallTurn scripts one turn that calls recall (through brokerd to
// memoryd: an audit decision and result, no container) and answers.
func recallTurn(srv *fake.Server, i int) {
	srv.Script(
		fake.Reply{Reasoning: "Search.", ToolCalls: []fake.ToolCall{{Name: "recall", Arguments: fmt.Sprintf(`{"query":"tea %d","k":3}`, i)}}},
		fake.Reply{Reasoning: "Answer.", Content: fmt.Sprintf("Answer %d.", i)},
	)
}

// lastTurn is the last turn session id's logs in state end, and the
// highest turn any record names (a turn under way when a backup was
// taken has its message but no end).
func lastTurn(t *testing.T, state, id string) (ended, named int64) {
	t.Helper()
	files, err := session.Files(layout.Sessions.In(state))
	require.NoError(t, err)
	for _, f := range files {
		if filepath.Base(filepath.Dir(f)) != id {
			continue
		}
		require.NoError(t, session.Scan(f, func(_ int, r session.Record, _ session.Trust) error {
			if e, ok := r.(*session.TurnEnd); ok {
				ended = e.Turn
			}
			named = max(named, r.TurnOf())
			return nil
		}))
	}
	return ended, named
}

// honchoConfigs writes memoryd.toml (a [honcho] table for the fake at
// url) before bxctl up would write its own; bxctl up's brokerd.toml has
// the gate socket memoryd asks.
func honchoConfigs(t *testing.T, state, url string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(layout.Config.In(state), 0o700))
	require.NoError(t, os.WriteFile(layout.ConfigPath(state, "memoryd"), []byte(fmt.Sprintf(
		"[honcho]\nurl = %q\npeer = \"agent\"\ntrusted_workspace = \"host1-trusted\"\nuntrusted_workspace = \"host1-untrusted\"\n",
		url)), 0o600))
}

// TestStackBackupRestore: `bxctl backup` taken while a session's turns
// (each a recall through brokerd, so audit lines) run and Honcho is down
// (so the fleet outbox holds what waits for it); the backup is restored
// into an empty directory after the stack stopped; the restored stack
// starts, `bxctl audit verify` passes on it, the session goes on from the
// turn the backup holds (one it caught under way is closed as
// interrupted), and the restored outbox sends what waited, each message
// once, when Honcho is back. Restoring over the old state is refused, and
// so is a copy of the backup with one byte changed, naming the file.
func TestStackBackupRestore(t *testing.T) {
	bin, state, srv := stack(t, 65536)
	hon := honchofake.New(t, honchofake.Options{})
	hon.SetFailure(http.StatusServiceUnavailable)
	honchoConfigs(t, state, hon.URL)
	exited := up(t, bin, state, srv)
	for i := 1; i <= 3; i++ {
		recallTurn(srv, i)
		require.Contains(t, chat(t, bin, state, "s1", fmt.Sprintf("question %d", i)), fmt.Sprintf("Answer %d.", i))
	}
	const load = 6
	for i := 4; i < 4+load; i++ {
		recallTurn(srv, i)
	}
	done := make(chan error, 1)
	go func() {
		for i := 4; i < 4+load; i++ {
			out, err := exec.Command(filepath.Join(bin, "bxctl"), "chat", "--state", state, "--session", "s1", "--message", fmt.Sprintf("question %d", i)).CombinedOutput()
			if err != nil || !strings.Contains(string(out), fmt.Sprintf("Answer %d.", i)) {
				done <- fmt.Errorf("turn %d under load: %v\n%s", i, err, out)
				return
			}
		}
		done <- nil
	}()
	dir := roletest.Dir(t)
	dest := filepath.Join(dir, "backup")
	out, err := bxctl(t, bin, "backup", "--state", state, dest)
	require.NoError(t, err, out)
	require.NoError(t, <-done)
	stopStack(t, bin, exited)

	anchors := filepath.Join(dir, "anchors")
	out, err = bxctl(t, bin, "restore", "--anchors", anchors, dest, state)
	require.Error(t, err)
	require.Contains(t, out, "restore-not-empty")

	// A copy of the backup with one byte of a session log changed.
	damaged := filepath.Join(dir, "damaged")
	require.NoError(t, exec.Command("cp", "-a", dest, damaged).Run())
	logs, _ := filepath.Glob(filepath.Join(damaged, "files", "sessions", "s1", "*.jsonl"))
	require.NotEmpty(t, logs)
	b, err := os.ReadFile(logs[0])
	require.NoError(t, err)
	b[len(b)/2] ^= 1
	require.NoError(t, os.WriteFile(logs[0], b, 0o600))
	rel, _ := filepath.Rel(damaged, logs[0])
	out, err = bxctl(t, bin, "restore", "--anchors", anchors, "--from", state, "--no-anchors", damaged, filepath.Join(dir, "s3"))
	require.Error(t, err)
	require.Contains(t, out, "backup: "+filepath.ToSlash(rel)+" differs from the manifest")
	require.Contains(t, out, "restore-corrupt")
	require.NoDirExists(t, filepath.Join(dir, "s3"))

	restored := filepath.Join(dir, "s2")
	// The owner never anchored state: restore says so (restore-anchors).
	out, err = bxctl(t, bin, "restore", "--anchors", anchors, "--from", state, "--no-anchors", dest, restored)
	require.NoError(t, err, out)
	require.Contains(t, out, "verified against their heads")
	m := regexp.MustCompile(`the fleet outbox \(index/fleet.db\) passes SQLite's integrity check: ([0-9]+) message`).FindStringSubmatch(out)
	require.NotNil(t, m, "restore did not check the fleet outbox:\n%s", out)
	require.NotEqual(t, "0", m[1], "the restored outbox holds nothing that waited for Honcho")

	ended, named := lastTurn(t, restored, "s1")
	require.GreaterOrEqual(t, ended, int64(3), "the backup lacks the turns before it")
	selftestReplies(srv)
	upExited := up(t, bin, restored, srv)
	out, err = bxctl(t, bin, "audit", "verify", "--anchors", anchors, layout.Audit.In(restored))
	require.NoError(t, err, out)
	recallTurn(srv, 100)
	require.Contains(t, chat(t, bin, restored, "s1", "after the restore"), "Answer 100.")
	// A turn the backup caught under way is loopd's as after a crash:
	// one that had reached the model is closed as interrupted and the
	// new message is the next turn; one that had only its message is
	// joined by the new message (loopd's answers_since rule).
	now, _ := lastTurn(t, restored, "s1")
	if now <= ended || now < named || now > named+1 {
		t.Fatalf("after the restore the session ended turn %d; the backup ended turn %d and named turn %d", now, ended, named)
	}
	reqs := srv.Requests(0)
	last := string(reqs[len(reqs)-1])
	require.Contains(t, last, "Answer 3.", "the model was not sent the session as the backup holds it")
	out, err = bxctl(t, bin, "audit", "verify", "--anchors", anchors, layout.Audit.In(restored))
	require.NoError(t, err, out)
	// Honcho back: the restored outbox sends what waited, each once.
	hon.SetFailure(0)
	waitMemory(t, bin, restored, " 0 pending", 90*time.Second)
	seen := map[string]int{}
	for _, msg := range hon.Messages() {
		seen[msg.Content]++
		require.Equal(t, 1, seen[msg.Content], "Honcho holds %q twice", msg.Content)
	}
	require.NotEmpty(t, seen, "nothing reached Honcho from the restored stack")
	stopStack(t, bin, upExited)
}
