package gateway

import (
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestStatusCommand: !status posts loopd's view of the thread's session
// and its peers, the model's name rendered plain, and never reaches the
// model; with a loopd that accepts and never answers, it says so within
// its bound.
func TestStatusCommand(t *testing.T) {
	r := newRig(t, nil)
	p := r.post(t, r.owner, r.dm, "", "hello")
	waitFor(t, "the answer", func() bool { return len(r.botPosts(p.ID)) == 1 })
	r.post(t, r.owner, r.dm, p.ID, "!status")
	waitFor(t, "the status", func() bool { return len(r.botPosts(p.ID)) == 2 })
	got := r.botPosts(p.ID)[1].Message
	for _, want := range []string{"- roles: gatewayd up (version ", "loopd up (version v1 abc), inferproxy up (version v1 abc), brokerd down (did not answer within 1.5s), memoryd up (version v1 abc)",
		"; llama-server answers through inferproxy; this thread's context 8192 of 32768 tokens (25%)", "epoch 1, 1 compaction(s), last turn 7, idle",
		"re-read 1 tokens beyond the new suffix and reused 8000; today's prefill 12.3 s", "- job digest: next 2026-12-02T07:00:00Z",
		"- approvals and allowances: unknown (brokerd: did not answer within 1.5s)",
		"- fleet memory: outbox 2 pending; Honcho's last answer: 503 \uff20all \\*\\*down\\*\\* (next try 2026-12-02T07:01:00Z)",
		"- audit anchor: newest 2026-12-01T07:00:00Z, "} {
		if !strings.Contains(got, want) {
			t.Errorf("!status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "![x](https://") {
		t.Errorf("the model's name was not rendered plain:\n%s", got)
	}
	if len(r.loop.sent()) != 1 {
		t.Error("!status reached the model")
	}
	old := statusWait
	statusWait = 300 * time.Millisecond
	t.Cleanup(func() { statusWait = old })
	r.loop.mu.Lock()
	r.loop.statusHang = true
	r.loop.mu.Unlock()
	start := time.Now()
	r.post(t, r.owner, r.dm, p.ID, "!status")
	waitFor(t, "the bounded reply", func() bool { return len(r.botPosts(p.ID)) == 3 })
	if m := r.botPosts(p.ID)[2].Message; !strings.Contains(m, "loopd did not answer within 300ms") || time.Since(start) > 5*time.Second {
		t.Errorf("a stuck loopd: %q after %v", m, time.Since(start))
	}
}

// TestStatusTextApprovals: brokerd's approvals and allowances, this
// thread's and another session's, each by id, tool and expiry; none
// when there are none; the anchor's age from now.
func TestStatusTextApprovals(t *testing.T) {
	st := &wire.SessionStatus{Session: "mm-a", Version: "v", Server: "llama-server answers through inferproxy",
		Approvals: []wire.ApprovalBrief{{ID: 3, Session: "mm-a", Tool: "fetch", Expires: "2026-12-02T08:00:00Z"}, {ID: 4, Session: "mm-b_x", Tool: "read_file", Expires: "2026-12-02T09:00:00Z"}},
		Allowances: []wire.AllowanceBrief{{ID: 2, Session: "mm-a", Tool: "read_file", Scope: "path /home/owner/notes", Expires: "2026-12-02T10:00:00Z"},
			{ID: 5, Session: "mm-b_x", Tool: "shell", Scope: "shell of exactly curl -H 'Authorization: tok-9f2' in /srv", Expires: "2026-12-02T11:00:00Z"}},
		Fleet: &wire.FleetState{}, AnchorAt: "2026-12-02T06:00:00Z"}
	got := StatusText(st, time.Date(2026, 12, 2, 7, 30, 0, 0, time.UTC))
	for _, want := range []string{"- approval #3: fetch in this thread, expires 2026-12-02T08:00:00Z",
		"- approval #4: read\\_file in session mm-b\\_x, expires 2026-12-02T09:00:00Z",
		"- allowance #2: read\\_file (path /home/owner/notes) in this thread, until 2026-12-02T10:00:00Z",
		"- allowance #5: shell in session mm-b\\_x, until 2026-12-02T11:00:00Z (its scope is shown in its own thread, and by bxctl allowances)",
		"- fleet memory: not configured (memory is local only)", "- audit anchor: newest 2026-12-02T06:00:00Z, 1h30m0s ago", "- jobs: none"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "tok-9f2") {
		t.Errorf("another session's allowance scope is shown in this thread:\n%s", got)
	}
	st.Approvals, st.Allowances, st.AnchorAt = nil, nil, ""
	got = StatusText(st, time.Now())
	for _, want := range []string{"- approvals: none pending", "- allowances: none in force", "- audit anchor: none recorded"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
}
