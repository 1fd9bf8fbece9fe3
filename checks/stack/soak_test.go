package stack

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	session "wntrmute.dev/boxmaker/pkg/logs/sessionlog"
)

// The soak's length: BOXMAKER_SOAK_TURNS turns (default 40, what `make
// test` runs) with a kill -9 every BOXMAKER_SOAK_KILL_EVERY turns on
// average (default 12). The full soak is 500 turns (docs/soak.md).
func soakSize() (turns, every int) {
	turns, every = 40, 12
	if n, err := strconv.Atoi(os.Getenv("BOXMAKER_SOAK_TURNS")); err == nil && n > 0 {
		turns = n
	}
	if n, err := strconv.Atoi(os.Getenv("BOXMAKER_SOAK_KILL_EVERY")); err == nil && n > 0 {
		every = n
	}
	return turns, every
}

var soakTurn = regexp.MustCompile(`soak turn ([0-9]+)`)

// soakReply answers the soak's requests by what they hold: every third
// turn calls recall first; a request after a tool result answers the
// turn it belongs to. Anything else (loopd's self-test) takes the script.
func soakReply(body []byte) (fake.Reply, bool) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return fake.Reply{}, false
	}
	turn := ""
	for i := len(req.Messages) - 1; i >= 0 && turn == ""; i-- {
		if m := req.Messages[i]; m.Role == "user" {
			if s, ok := m.Content.(string); ok {
				if sm := soakTurn.FindAllStringSubmatch(s, -1); sm != nil {
					turn = sm[len(sm)-1][1]
				}
			}
			if turn == "" {
				return fake.Reply{}, false
			}
		}
	}
	n, _ := strconv.Atoi(turn)
	if last := req.Messages[len(req.Messages)-1]; last.Role == "user" && soakAsks(n) {
		return fake.Reply{Reasoning: "Read it.", ToolCalls: []fake.ToolCall{{Name: "call_tool", Arguments: soakAskCall}}}, true
	}
	if last := req.Messages[len(req.Messages)-1]; last.Role == "user" && n%3 == 0 {
		return fake.Reply{Reasoning: "Search.", ToolCalls: []fake.ToolCall{{Name: "recall", Arguments: fmt.Sprintf(`{"query":"soak %d","k":3}`, n)}}}, true
	}
	return fake.Reply{Reasoning: "Answer.", Content: "Answer " + turn + "."}, true
}

// roleRSS is the resident set (VmRSS, KiB) of role's process on state.
func roleRSS(t *testing.T, bin, role, state string) int {
	pid := pidOf(t, filepath.Join(bin, role)+" ", state)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// TestStackSoak drives turns over three bxctl chat sessions and two
// Mattermost threads (through gatewayd and the fake Mattermost): every
// third a recall through brokerd and memoryd, every eighth a read under
// an ask grant whose approval brokerd posts in the thread and the owner
// answers there; with compaction at idle and an owner's job every
// minute; while a random role is killed with SIGKILL at a random point,
// in or between turns, and the stack is started again. At the end every
// logged owner message's turn ended exactly once, with the model's
// answer or as interrupted; no turn has two answers; no answer and no
// approval is posted twice in Mattermost, and every answer a thread's
// log holds is posted there; every session log decodes; `bxctl audit
// verify` passes (the audit and consult chains); and each role's
// resident memory is reported and bounded.
func TestStackSoak(t *testing.T) {
	turns, every := soakSize()
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	bin := Build(t, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd", "gatewayd")
	state := ShortState(t)
	srv := fake.New(t, fake.Options{Slots: 2, NCtx: 65536})
	selftestReplies(srv)
	preconfigure(t, state, srv)
	srv.Respond(soakReply)
	mmChat := newSoakChat(t, state)
	// Compaction at idle once a session's context passes 3% of the slot
	// (every few turns), and an owner's job every minute.
	epochConfig(t, state, 300, 3, false, "")
	require.NoError(t, os.MkdirAll(layout.Jobs.In(state), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(layout.Jobs.In(state), "soak-job.toml"), []byte(job("soak-job", `every = "1m"`, "Say how the soak goes.")), 0o600))
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("soak: %d turns, a kill every %d on average, seed %d", turns, every, seed)
	u, _ := url.Parse(srv.URL())
	start := func() <-chan error { return Up(t, bin, state, u.Host, mmChat.tokenEnv()) }
	exited := start()
	// gatewayd's first start fetches nothing it missed (it has no
	// cursor yet): the first post waits for its WebSocket.
	mmChat.connected(t, 1, func() string {
		b, _ := os.ReadFile(filepath.Join(state, "logs", "gatewayd.log"))
		return string(b)
	})
	stopOwner := make(chan struct{})
	ownerDone := make(chan struct{})
	go func() { defer close(ownerDone); mmChat.approve(t, stopOwner) }()
	roles := []string{"inferproxy", "memoryd", "brokerd", "loopd", "gatewayd"}
	peak := map[string]int{}
	measure := func() {
		for _, r := range roles {
			peak[r] = max(peak[r], roleRSS(t, bin, r, state))
		}
	}
	kills, failed, mmTurns := 0, 0, 0
	var inMM bool
	began := time.Now()
	for i := 1; i <= turns; i++ {
		done := make(chan error, 1)
		var thread int
		if inMM, thread = soakInMattermost(i); inMM {
			mmTurns++
			root := mmChat.post(t, i, thread)
			go func() {
				if !mmChat.answeredIn(root, i, time.Minute) {
					done <- fmt.Errorf("turn %d not answered in its thread", i)
					return
				}
				done <- nil
			}()
		} else {
			sess := fmt.Sprintf("soak%d", i%3)
			cmd := exec.Command(filepath.Join(bin, "bxctl"), "chat", "--state", state, "--session", sess, "--message", fmt.Sprintf("soak turn %d", i))
			require.NoError(t, cmd.Start())
			go func() { done <- cmd.Wait() }()
		}
		if rng.IntN(every) == 0 {
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond) // a turn takes tens of ms on the fake
			measure()
			victim := roles[rng.IntN(len(roles))]
			pid := pidOf(t, filepath.Join(bin, victim)+" ", state)
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			kills++
			t.Logf("turn %d: killed %s (pid %d)", i, victim, pid)
			select {
			case <-exited:
			case <-time.After(time.Minute):
				t.Fatal("bxctl up did not stop after a role was killed")
			}
			selftestReplies(srv)
			exited = start()
			// A Mattermost turn the kill interrupted is told so, not
			// answered: its thread is checked at the end.
			wait := time.After(time.Hour)
			if inMM {
				wait = time.After(20 * time.Second)
			}
			select {
			case err := <-done:
				if err != nil {
					failed++
				}
			case <-wait:
				failed++
			}
			continue
		}
		if err := <-done; err != nil {
			t.Logf("turn %d: %v", i, err)
			failed++
		}
	}
	// One more message per session closes a turn a kill left open (turn
	// numbers past the soak's, none of them one that asks).
	for s := 0; s < 3; s++ {
		chat(t, bin, state, fmt.Sprintf("soak%d", s), fmt.Sprintf("soak turn %d", 1000+2*s))
	}
	close(stopOwner)
	<-ownerDone
	measure()
	elapsed := time.Since(began)
	out, err := bxctl(t, bin, "audit", "verify", "--anchors", filepath.Join(t.TempDir(), "anchors"), layout.Audit.In(state))
	require.NoError(t, err, out)
	checkSoakLogs(t, state)
	answers, approvals := mmChat.check(t, state)
	t.Logf("soak: Mattermost: %d turns in 2 threads, %d answers and %d approval posts, each posted once; %d approvals answered by the owner", mmTurns, answers, approvals, len(mmChat.answered))
	require.NotZero(t, approvals, "no approval was posted")
	jobs, err := bxctl(t, bin, "jobs", "--state", state)
	require.NoError(t, err, jobs)
	require.Contains(t, jobs, "job soak-job: every 1m", "the owner's job is not scheduled")
	t.Logf("soak: %s", strings.ReplaceAll(strings.TrimSpace(jobs), "\n", "; "))
	for _, r := range roles {
		t.Logf("soak: %s peak resident memory %d KiB", r, peak[r])
		require.Less(t, peak[r], 256<<10, "%s's resident memory", r)
	}
	t.Logf("soak: %d turns in %v, %d kills, %d turns failed (each killed mid-turn)", turns, elapsed.Round(time.Second), kills, failed)
	require.LessOrEqual(t, failed, kills, "a turn failed without a kill")
	stopStack(t, bin, exited)
}

// checkSoakLogs checks every session log: it decodes; each turn with an
// owner message has exactly one turn_end and an outcome (an answer, or
// the stop record of an interrupted turn); no turn has two answers.
func checkSoakLogs(t *testing.T, state string) {
	files, err := session.Files(layout.Sessions.In(state))
	require.NoError(t, err)
	epochs := 0
	for _, f := range files {
		require.NoError(t, session.Scan(f, func(int, session.Record, session.Trust) error { return nil }), "a session log does not decode")
		if _, e, _ := session.Name(f); e > 0 {
			epochs++
		}
	}
	t.Logf("soak: %d session logs, %d of them epochs after a compaction", len(files), epochs)
	type turn struct{ users, ends, answers, stops int }
	ids := map[string]bool{}
	for _, f := range files {
		if id := filepath.Base(filepath.Dir(f)); strings.HasPrefix(id, "soak") || strings.HasPrefix(id, "mm-") {
			ids[id] = true
		}
	}
	require.GreaterOrEqual(t, len(ids), 3, "the soak's sessions: %v", ids)
	for id := range ids {
		turns := map[int64]*turn{}
		at := func(n int64) *turn {
			if turns[n] == nil {
				turns[n] = &turn{}
			}
			return turns[n]
		}
		for _, f := range files {
			if filepath.Base(filepath.Dir(f)) != id {
				continue
			}
			require.NoError(t, session.Scan(f, func(_ int, r session.Record, _ session.Trust) error {
				switch v := r.(type) {
				case *session.User:
					at(v.Turn).users++
				case *session.TurnEnd:
					at(v.Turn).ends++
				case *session.Stopped:
					at(v.Turn).stops++
				case *session.Assistant:
					if len(v.Message.ToolCalls) == 0 && v.Message.Content != "" {
						at(v.Turn).answers++
					}
				}
				return nil
			}), "a session log does not decode")
		}
		require.NotEmpty(t, turns, "session %s has no turns", id)
		for n, tr := range turns {
			if tr.users == 0 {
				continue // a turn whose messages moved to a new epoch
			}
			require.Equal(t, 1, tr.ends, "%s turn %d ended %d times", id, n, tr.ends)
			require.LessOrEqual(t, tr.answers, 1, "%s turn %d answered %d times", id, n, tr.answers)
			require.GreaterOrEqual(t, tr.answers+tr.stops, 1, "%s turn %d: neither answered nor told it was interrupted", id, n)
		}
	}
}
