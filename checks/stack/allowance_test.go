package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStackSessionAllowance (issue 26) runs the real stack against the
// fake Mattermost and the real runner (Podman): under an ask grant the
// model reads the same file twice; the owner answers the first
// `!approve ID CODE session`; the second runs in a container with no
// approval post and its audit record names the allowance; a read of
// another file asks again; `!revoke ID` in the thread ends the
// allowance, and the same file asks again in the next turn; a change to
// the grant file ends the next allowance, and the same file asks again;
// `always` writes a proposal that bxctl grants apply turns into a grant.
func TestStackSessionAllowance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	r := newAllowRig(t, nil)
	r.srv.Script(
		// Turn 1: a.txt (asks), a.txt (the allowance), b.txt (asks).
		r.read("a.txt"), r.read("a.txt"), r.read("b.txt"),
		done("Read them."),
		// Turn 2, after !revoke: a.txt asks again.
		r.read("a.txt"), done("Read it again."),
		// Turn 3, after the grant file changed: a.txt asks again.
		r.read("a.txt"), done("Read it a third time."),
		// Turn 4, after bxctl grants apply: a.txt runs without asking.
		r.read("a.txt"), done("Read it a fourth time."),
	)
	r.up()
	state, files, bin := r.state, r.files, r.bin

	root := r.say("", "read my files")
	id, code := r.waitApproval(root, 1)
	first := r.seen[id]
	if !strings.Contains(first, "`!approve "+id+" "+code+" session`: runs it, and from now on runs without asking read\\_file of exactly "+filepath.Join(files, "a.txt")) {
		t.Errorf("the approval post does not say what `session` does:\n%s", first)
	}
	r.say(root, "!approve "+id+" "+code+" session")
	// The second read runs under the allowance; the third (b.txt) asks.
	id2, code2 := r.waitApproval(root, 2)
	if p := r.seen[id2]; !strings.Contains(p, "b.txt") {
		t.Fatalf("the second approval is not for b.txt:\n%s", p)
	}
	r.say(root, "!deny "+id2+" "+code2+" not that one")
	r.waitLast(root, "Read them.")
	if n := r.count(root); n != 2 {
		t.Errorf("%d approval posts, want 2 (a.txt once, b.txt)", n)
	}
	if !strings.Contains(r.botSaid(root), "session allowance "+id+" made") {
		t.Errorf("no reply in the thread says the allowance was made:\n%s", r.logs())
	}
	audit := readAuditLog(t, state)
	if r.decidedBy("a.txt", id) != 1 {
		t.Errorf("no allowed decision of a.txt names allowance %s:\n%s", id, audit)
	}
	if !strings.Contains(audit, `"type":"allowance","seq":`) || !strings.Contains(audit, `"approver":"mattermost:`+r.owner.ID+`"`) {
		t.Errorf("the audit log lacks the allowance record:\n%s", audit)
	}
	session, _ := os.ReadFile(filepath.Join(state, "sessions", "mm-"+root, "0.jsonl"))
	if strings.Count(string(session), "alpha 1") < 2 {
		t.Errorf("a.txt was not read twice in containers:\n%s", session)
	}

	// !revoke ends it; the same file asks again.
	r.say(root, "!revoke "+id)
	r.waitLast(root, "session allowance "+id+" revoked")
	r.say(root, "@boxmaker read a again")
	id3, code3 := r.waitApproval(root, 3)
	r.say(root, "!approve "+id3+" "+code3+" session")
	r.waitLast(root, "Read it again.")

	// A change to the grant the new allowance rode on ends it.
	r.write("grants/files.toml", r.filesGrant(true))
	require.NoError(t, os.Chmod(filepath.Join(state, "grants", "files.toml"), 0o640))
	r.say(root, "@boxmaker read a once more")
	id4, code4 := r.waitApproval(root, 4)
	grantsBefore, _ := os.ReadFile(filepath.Join(state, "grants", "files.toml"))
	r.say(root, "!approve "+id4+" "+code4+" always")
	r.waitLast(root, "Read it a third time.")

	// always: a proposal appears, grants/ is unchanged, bxctl grants
	// apply writes an owner-owned grant brokerd's loader accepts, and the
	// next identical call runs with no post.
	prop, err := os.ReadFile(filepath.Join(state, "proposals", id4+".toml"))
	if err != nil {
		t.Fatalf("no proposal in proposals/: %v", err)
	}
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
	r.say(root, "@boxmaker read a a fourth time")
	r.waitLast(root, "Read it a fourth time.")
	if n := r.count(root); n != 4 {
		t.Errorf("%d approvals after the standing grant, want still 4", n)
	}
	if audit := readAuditLog(t, state); !strings.Contains(audit, `"allowance":`+id3+`,"reason":"grant_changed"`) {
		t.Errorf("the audit log lacks the end of allowance %s by the grant's change:\n%s", id3, audit)
	}
	if audit := readAuditLog(t, state); !strings.Contains(audit, `"allowance":`+id+`,"reason":"revoked","by":"mattermost:`+r.owner.ID+`"`) {
		t.Errorf("the audit log lacks the revocation:\n%s", audit)
	}
	if out, err := bxctl(t, bin, "audit", "verify", filepath.Join(state, "broker", "audit")); err != nil {
		t.Errorf("bxctl audit verify: %v %s", err, out)
	}
}
