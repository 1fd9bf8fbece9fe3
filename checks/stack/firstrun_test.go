package stack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	honchofake "wntrmute.dev/boxmaker/checks/fake/honcho"
	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// firstStack is a fresh state directory that bxctl up fills itself (only
// inferproxy's config is written first, for the fake's accept rate), and
// with fleet set, memoryd's config with a [honcho] table for a fake
// Honcho, as an owner who turned fleet memory on would.
func firstStack(t *testing.T, fleet bool) (bin, state string, srv *fake.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	bin = buildStack(t)
	state = ShortState(t)
	srv = fake.New(t, fake.Options{Slots: 2, NCtx: 65536})
	selftestReplies(srv)
	preconfigure(t, state, srv)
	if fleet {
		hon := honchofake.New(t, honchofake.Options{})
		require.NoError(t, os.WriteFile(layout.ConfigPath(state, layout.Memoryd), []byte(fmt.Sprintf(
			"[honcho]\nurl = %q\npeer = \"agent\"\ntrusted_workspace = \"host1-trusted\"\nuntrusted_workspace = \"host1-untrusted\"\n",
			hon.URL)), 0o600))
	}
	return bin, state, srv
}

// TestStackDoctorFresh: `bxctl doctor` on a stack bxctl up has just made
// and that has answered one chat turn reports no problem, with fleet
// memory configured and without: every file the roles made while
// running (memoryd's SQLite files among them) has the layout's mode, and
// every config bxctl up wrote passes its role's own loader.
func TestStackDoctorFresh(t *testing.T) {
	for _, fleet := range []bool{false, true} {
		t.Run(fmt.Sprintf("fleet=%v", fleet), func(t *testing.T) {
			bin, state, srv := firstStack(t, fleet)
			up(t, bin, state, srv)
			srv.Script(fake.Reply{Reasoning: "Greet.", Content: "Hello, owner."})
			require.Contains(t, chat(t, bin, state, "first", "hello"), "Hello, owner.")
			if fleet {
				// The turn reaches the outbox: fleet.db and its -wal and
				// -shm exist while memoryd runs.
				waitFor(t, "fleet.db", 10*time.Second, func() bool {
					_, err := os.Stat(filepath.Join(layout.Index.In(state), "fleet.db-wal"))
					return err == nil
				})
			}
			out, _ := bxctl(t, bin, "doctor", "--state", state, "--json")
			var rep struct {
				Findings []struct{ ID, Severity, Message string }
				Exit     int
			}
			require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
			for _, f := range rep.Findings {
				if f.Severity == "problem" {
					t.Errorf("doctor on a fresh stack: %s: %s", f.ID, f.Message)
				}
			}
			if t.Failed() {
				t.Logf("doctor's report:\n%s", out)
			}
		})
	}
}

// TestStackJobOwnedByRole: under bxctl up as root each role is its own
// user; bxctl up writes the owner's uid as loopd's [jobs] owner_uid and
// brokerd's owner_uid, and a job file owned by loopd's uid (which loopd
// could have written) is refused while the owner's own job is listed.
func TestStackJobOwnedByRole(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("each role is its own user only under bxctl up as root")
	}
	bin, state, srv := firstStack(t, false)
	up(t, bin, state, srv)
	users, err := layout.LoadUsers(state)
	require.NoError(t, err)
	owner := users.Of(layout.Owner)
	for _, role := range []string{layout.Loopd, layout.Brokerd} {
		b, err := os.ReadFile(layout.ConfigPath(state, role))
		require.NoError(t, err)
		require.Contains(t, string(b), fmt.Sprintf("\nowner_uid = %d\n", owner.UID), "%s.toml", role)
	}
	loopd := users.Of(layout.Loopd)
	plant := func(name string, uid, gid uint32) {
		p := filepath.Join(layout.Jobs.In(state), name)
		require.NoError(t, os.WriteFile(p, []byte(job(strings.TrimSuffix(name, ".toml"), `cron = "0 3 * * *"`, "report")), 0o640))
		require.NoError(t, os.Chown(p, int(uid), int(gid)))
		require.NoError(t, os.Chmod(p, 0o640))
	}
	plant("mine.toml", owner.UID, loopd.GID)
	plant("planted.toml", loopd.UID, loopd.GID)
	// loopd reads the jobs directory every 15 s by default.
	var out string
	waitFor(t, "bxctl jobs to list both files", 40*time.Second, func() bool {
		out, _ = bxctl(t, bin, "jobs", "--state", state)
		if strings.Contains(out, "job mine:") && strings.Contains(out, "planted.toml") {
			return true
		}
		time.Sleep(300 * time.Millisecond) // each look runs bxctl
		return false
	})
	require.Contains(t, out, "see docs/runbook.md#owner-file-unsafe", out)
	require.NotContains(t, out, "job planted:", "a job file owned by loopd's uid was believed")
}
