package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// superviseBrokerd puts brokerd under a supervisor in bin, as its
// systemd unit runs it (Restart=on-failure): bin/brokerd becomes a
// script that starts bin/brokerd.real again whenever it is killed
// (SIGKILL), so brokerd restarts alone while bxctl up keeps the other
// roles running. SIGTERM (bxctl up stopping) stops it for good.
func superviseBrokerd(t *testing.T, bin string) {
	t.Helper()
	real := filepath.Join(bin, "brokerd.real")
	require.NoError(t, os.Rename(filepath.Join(bin, "brokerd"), real))
	script := `#!/bin/sh
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit $?' TERM INT
while :; do
	"$0.real" "$@" &
	child=$!
	wait "$child"
	rc=$?
	[ "$rc" -eq 137 ] || exit "$rc"
done
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "brokerd"), []byte(script), 0o755))
	t.Cleanup(func() { // a brokerd.real its supervisor left behind
		if pid := findPid(bin+"/brokerd.real", bin); pid != 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// findPid is the process whose command line has all of words, or 0.
func findPid(words ...string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(d.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		all := true
		for _, w := range words {
			all = all && strings.Contains(cmdline, w)
		}
		if all {
			return pid
		}
	}
	return 0
}

// killBrokerd kills brokerd outright (SIGKILL: no chance to close
// anything) and waits until its supervisor has started it again and it
// answers on admin.sock.
func (r *allowRig) killBrokerd() {
	r.t.Helper()
	old := findPid(r.bin+"/brokerd.real", r.state)
	require.NotZero(r.t, old, "no brokerd.real is running")
	require.NoError(r.t, syscall.Kill(old, syscall.SIGKILL))
	waitFor(r.t, "brokerd to start again and answer", 60*time.Second, func() bool {
		pid := findPid(r.bin+"/brokerd.real", r.state)
		if pid == 0 || pid == old {
			return false
		}
		_, err := bxctl(r.t, r.bin, "approvals", "--state", r.state)
		return err == nil
	})
}

// TestStackSessionAllowanceBrokerdRestart (issue 26) kills brokerd
// outright twice while the rest of the stack runs on (its unit restarts
// it, as systemd would). With a session allowance live, the new brokerd
// rebuilds it from the audit log: bxctl allowances lists it and the next
// covered call runs with no post, its audit record naming the allowance.
// With an approval pending, the turn is told the call failed and the
// owner hears in the approval's thread that it was lost, never silence;
// the owner's answer to it afterwards answers nothing.
func TestStackSessionAllowanceBrokerdRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	r := newAllowRig(t, nil)
	superviseBrokerd(t, r.bin)
	r.srv.Script(r.read("a.txt"), r.read("a.txt"), done("Read them."))
	r.up()
	root := r.say("", "read my file")
	id, code := r.waitApproval(root, 1)
	r.say(root, "!approve "+id+" "+code+" session")
	r.waitLast(root, "Read them.")
	if r.decidedBy("a.txt", id) != 1 {
		t.Fatalf("the second read was not decided by allowance %s:\n%s", id, readAuditLog(t, r.state))
	}

	// brokerd restarts with the allowance live.
	r.killBrokerd()
	if out, err := bxctl(t, r.bin, "allowances", "--state", r.state); err != nil || !strings.Contains(out, "mm-"+root) {
		t.Errorf("bxctl allowances after the restart does not list allowance %s: %v\n%s", id, err, out)
	}
	r.srv.Script(r.read("a.txt"), r.read("b.txt"), done("Read after the restart."))
	r.say(root, "@boxmaker read a and b")
	id2, code2 := r.waitApproval(root, 2)
	if p := r.seen[id2]; !strings.Contains(p, "b.txt") {
		t.Fatalf("the approval after the restart is not for b.txt (a.txt asked again?):\n%s", p)
	}
	if n := r.decidedBy("a.txt", id); n != 2 {
		t.Errorf("%d reads of a.txt decided by allowance %s, want 2 (one after the restart):\n%s", n, id, readAuditLog(t, r.state))
	}

	// brokerd restarts with approval id2 pending: the thread hears it.
	r.killBrokerd()
	r.waitLast(root, "Read after the restart.")
	said := r.botSaid(root)
	if !strings.Contains(said, "Approval "+id2+" is no longer pending") || !strings.Contains(said, "brokerd restarted") {
		t.Errorf("the thread was not told approval %s was lost:\n%s", id2, said)
	}
	session, _ := os.ReadFile(filepath.Join(r.state, "sessions", "mm-"+root, "0.jsonl"))
	if strings.Contains(string(session), "beta 2") {
		t.Errorf("b.txt was read though its approval was lost:\n%s", session)
	}
	// The owner's answer to it afterwards finds nothing pending (gatewayd
	// heard it and logged that), and answers nothing in brokerd.
	r.say(root, "!approve "+id2+" "+code2)
	waitFor(t, "gatewayd to hear the answer of a lost approval", 30*time.Second, func() bool {
		d, _ := os.ReadFile(filepath.Join(r.state, "logs", "gatewayd.log"))
		return strings.Contains(string(d), `"msg":"approval command ignored: the id is not pending in this thread","role":"gatewayd","approval":`+id2+",")
	})
	if strings.Contains(readAuditLog(t, r.state), `"decision":`+id2+`,"answer":"approved"`) {
		t.Errorf("lost approval %s was answered after the restart:\n%s", id2, readAuditLog(t, r.state))
	}
	if out, err := bxctl(t, r.bin, "audit", "verify", filepath.Join(r.state, "broker", "audit")); err != nil {
		t.Errorf("bxctl audit verify after two kills: %v %s", err, out)
	}
}
