package stack

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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

// TestStackBackupRestore: `bxctl backup` taken while a session's turns
// (each a recall through brokerd, so audit lines) run; the backup is
// restored into an empty directory after the stack stopped; the restored
// stack starts, `bxctl audit verify` passes on it, and the session goes
// on from the turn the backup holds (one it caught under way is closed
// as interrupted). Restoring over the old state is refused.
func TestStackBackupRestore(t *testing.T) {
	bin, state, srv := stack(t, 65536)
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
	restored := filepath.Join(dir, "s2")
	// The owner never anchored state: restore says so (restore-anchors).
	out, err = bxctl(t, bin, "restore", "--anchors", anchors, "--from", state, "--no-anchors", dest, restored)
	require.NoError(t, err, out)
	require.Contains(t, out, "verified against their heads")

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
	stopStack(t, bin, upExited)
}
