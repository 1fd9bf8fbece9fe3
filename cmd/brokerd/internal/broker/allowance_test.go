package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

const report = `{"path":"/home/owner/Downloads/report.pdf"}`

// readIn sends a read_file of args in session s1 and epoch.
func (h *harness) readIn(t *testing.T, epoch int64, args string) *conn {
	c := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	c.Send(&wire.ToolRequest{Session: "s1", CallID: "c1", Tool: "read_file", Arguments: []byte(args), Epoch: epoch})
	return c
}

// approveSession asks for report, approves it for the session and
// returns the approval id and the owner's confirmation.
func (h *harness) approveSession(t *testing.T, epoch int64, scope wire.AnswerScope) (int64, string) {
	t.Helper()
	c := h.readIn(t, epoch, report)
	p, ok := c.Recv().(*wire.ToolPending)
	if !ok {
		t.Fatal("the first call did not ask")
	}
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.GetApproval{ID: p.ID})
	code := admin.Recv().(*wire.Approval).Call.Code
	admin.Send(&wire.Approve{ID: p.ID, Code: code, Scope: scope})
	a, ok := admin.Recv().(*wire.Answered)
	if !ok {
		t.Fatalf("approve with scope %q was not taken", scope)
	}
	if r := result(t, c); !strings.Contains(r.Output, "tool containers are not configured") {
		t.Fatalf("the approved call: %+v, want it allowed (the refusing runner)", r)
	}
	return p.ID, a.Msg
}

// decidedWithout reports whether a call ran without asking.
func decidedWithout(t *testing.T, c *conn) bool {
	t.Helper()
	switch v := c.Recv().(type) {
	case *wire.ToolPending:
		return false
	case *wire.ToolResult:
		if !strings.Contains(v.Output, "tool containers are not configured") {
			t.Fatalf("call = %+v, want allowed or asked", v)
		}
		return true
	default:
		t.Fatalf("call answered %s", v.Tag())
	}
	return false
}

func (h *harness) allowances(t *testing.T) []wire.AllowanceInfo {
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.ListAllowances{})
	return admin.Recv().(*wire.Allowances).Allowances
}

func TestSessionAllowance(t *testing.T) {
	h := start(t, grants)
	id, msg := h.approveSession(t, 0, wire.ScopeSession)
	if !strings.Contains(msg, fmt.Sprintf("session allowance %d made: read_file of exactly /home/owner/Downloads/report.pdf", id)) || !strings.Contains(msg, "epoch ends") {
		t.Errorf("the owner's confirmation = %q, want the allowance, its exact scope and when it ends", msg)
	}
	if !decidedWithout(t, h.readIn(t, 0, report)) {
		t.Fatal("the same call in the same epoch asked again")
	}
	if decidedWithout(t, h.readIn(t, 0, `{"path":"/home/owner/Downloads/other.pdf"}`)) {
		t.Error("another file in the same directory ran without asking")
	}
	if l := h.allowances(t); len(l) != 1 || l[0].ID != id || l[0].Tool != "read_file" {
		t.Errorf("allowances = %+v", l)
	}
	// A deny grant still denies: the allowance only ever turns an ask.
	if r := result(t, h.readIn(t, 0, `{"path":"/home/owner/.ssh/id"}`)); r.Status != wire.StatusDenied {
		t.Errorf("a denied path under an allowance: %+v", r)
	}
	// Another epoch (compaction): the allowance ends and the call asks.
	if decidedWithout(t, h.readIn(t, 1, report)) {
		t.Error("the call in the next epoch ran without asking")
	}
	if l := h.allowances(t); len(l) != 0 {
		t.Errorf("after the epoch changed, allowances = %+v", l)
	}
	h.stop()
	log := readAudit(t, h.cfg.StateDir)
	for _, want := range []string{
		fmt.Sprintf(`"type":"allowance","seq":%d`, id+2),
		`"outcome":"allowed","grant":{"id":"downloads-read"`,
		fmt.Sprintf(`"allowance":%d}}`, id),
		`"type":"allowance_end","seq":`,
		fmt.Sprintf(`"allowance":%d,"reason":"epoch"}`, id),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %s:\n%s", want, log)
		}
	}
	if rep := audit.Verify(filepath.Join(h.cfg.StateDir, "broker", "audit")); !rep.OK() {
		t.Errorf("audit: %s", rep.Summary())
	}
}

func TestSessionAllowanceDir(t *testing.T) {
	h := start(t, grants)
	h.approveSession(t, 0, wire.ScopeSessionDir)
	if !decidedWithout(t, h.readIn(t, 0, `{"path":"/home/owner/Downloads/other.pdf"}`)) {
		t.Error("`session dir`: another file directly in the directory asked")
	}
	if decidedWithout(t, h.readIn(t, 0, `{"path":"/home/owner/Downloads/sub/deeper.pdf"}`)) {
		t.Error("`session dir`: a file in a subdirectory ran without asking")
	}
}

func TestSessionAllowanceRevoked(t *testing.T) {
	h := start(t, grants)
	id, _ := h.approveSession(t, 0, wire.ScopeSession)
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.RevokeAllowance{ID: id})
	if a, ok := admin.Recv().(*wire.Answered); !ok || a.Outcome != "revoked" {
		t.Fatalf("revoke = %#v", a)
	}
	if decidedWithout(t, h.readIn(t, 0, report)) {
		t.Error("after revoke the call ran without asking")
	}
	admin = h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.RevokeAllowance{ID: id})
	if e, ok := admin.Recv().(*wire.Error); !ok || !strings.Contains(e.Msg, "runbook.md#allowance-not-live") {
		t.Errorf("a second revoke = %#v, want not live", e)
	}
}

// TestSessionAllowanceGrantChanged: an edit of the grant the allowance
// rode on ends it, even an edit that still asks.
func TestSessionAllowanceGrantChanged(t *testing.T) {
	h := start(t, grants)
	id, _ := h.approveSession(t, 0, wire.ScopeSession)
	edited := strings.Replace(grants, `paths = ["/home/owner/Downloads"]
max_taint = "secret"`, `paths = ["/home/owner/Downloads"]
max_taint = "private"`, 1)
	if edited == grants {
		t.Fatal("the edit changed nothing")
	}
	if err := os.WriteFile(filepath.Join(h.cfg.GrantsDir, "grants.toml"), []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if decidedWithout(t, h.readIn(t, 0, report)) {
		t.Error("after the grant changed the call ran without asking")
	}
	h.stop()
	if log := readAudit(t, h.cfg.StateDir); !strings.Contains(log, fmt.Sprintf(`"allowance":%d,"reason":"grant_changed"`, id)) {
		t.Errorf("no grant_changed end in:\n%s", log)
	}
}

// TestSessionAllowanceRestart: a live allowance is rebuilt from the audit
// log when brokerd starts again, and goes on deciding.
func TestSessionAllowanceRestart(t *testing.T) {
	h := start(t, grants)
	id, _ := h.approveSession(t, 0, wire.ScopeSession)
	h.stop()
	h.stop = sockettest.Start(t, "brokerd", filepath.Join(h.cfg.AdminSocketDir, wire.Admin.Name), func(ctx context.Context) error {
		return Run(ctx, slog.New(slog.DiscardHandler), h.cfg, false)
	})
	if l := h.allowances(t); len(l) != 1 || l[0].ID != id {
		t.Fatalf("after a restart allowances = %+v, want %d rebuilt", l, id)
	}
	if !decidedWithout(t, h.readIn(t, 0, report)) {
		t.Error("after a restart the covered call asked again")
	}
}

// TestSessionAllowanceOtherSession: an allowance is its session's only.
func TestSessionAllowanceOtherSession(t *testing.T) {
	h := start(t, grants)
	h.approveSession(t, 0, wire.ScopeSession)
	c := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	c.Send(&wire.ToolRequest{Session: "s2", CallID: "c1", Tool: "read_file", Arguments: []byte(report)})
	if decidedWithout(t, c) {
		t.Error("another session's call ran under the allowance")
	}
}

// TestSessionScopeRefused: `session dir` on a call that is no file is
// refused and answers nothing; the approval stays pending.
func TestSessionScopeRefused(t *testing.T) {
	h := start(t, grants+`
[[grant]]
id = "web-ask"
tool = "http_fetch"
hosts = ["example.com"]
max_taint = "secret"
mode = "ask"
`)
	c := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	c.Send(&wire.ToolRequest{Session: "s1", CallID: "c1", Tool: "http_fetch", Arguments: []byte(`{"url":"https://example.com/a"}`)})
	p := c.Recv().(*wire.ToolPending)
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.GetApproval{ID: p.ID})
	code := admin.Recv().(*wire.Approval).Call.Code
	admin.Send(&wire.Approve{ID: p.ID, Code: code, Scope: wire.ScopeSessionDir})
	if e, ok := admin.Recv().(*wire.Error); !ok || !strings.Contains(e.Msg, "allowance-refused") {
		t.Fatalf("session dir on http_fetch = %#v, want refused", e)
	}
	admin.Send(&wire.GetApproval{ID: p.ID})
	if _, ok := admin.Recv().(*wire.Approval); !ok {
		t.Error("the refused answer answered the approval")
	}
}

// TestCourierSessionAllowance: an approver's `session` answer from the
// chat makes an allowance whose connection stays open; `!revoke` on it
// ends the allowance; a revoke on admin.sock closes a held connection.
func TestCourierSessionAllowance(t *testing.T) {
	gw, conns := fakeGateway(t)
	h := startWith(t, grants, func(c *brokerd.Config) { c.GatewaySocket = gw })
	owner := "mattermost:" + strings.Repeat("o", 26)
	chat := func() (*conn, int64) {
		call := h.readIn(t, 0, report)
		p := call.Recv().(*wire.ToolPending)
		g := next(t, conns)
		post := g.Recv().(*wire.PostApproval)
		if !strings.Contains(post.Call.SessionScope, "read_file of exactly /home/owner/Downloads/report.pdf") {
			t.Errorf("the approval's session scope = %q", post.Call.SessionScope)
		}
		g.Send(&wire.ApprovalPosted{ID: p.ID, Parts: 1, Answerable: true})
		g.Send(&wire.OwnerAnswer{ID: p.ID, Code: post.Call.Code, Approve: true, Approver: owner, Scope: wire.ScopeSession})
		if a, ok := g.Recv().(*wire.Answered); !ok || a.Outcome != wire.OutcomeAllowance || !strings.Contains(a.Msg, "session allowance") {
			t.Fatalf("answer = %+v", a)
		}
		result(t, call)
		return g, p.ID
	}
	g, id := chat()
	// The approval is no longer pending, yet the connection stays open.
	time.Sleep(5 * courierPoll)
	if !decidedWithout(t, h.readIn(t, 0, report)) {
		t.Fatal("the covered call asked")
	}
	g.Send(&wire.AllowanceRevoke{ID: id, Approver: owner})
	if a, ok := g.Recv().(*wire.Answered); !ok || a.Outcome != "revoked" {
		t.Fatalf("revoke = %+v", a)
	}
	if l := h.allowances(t); len(l) != 0 {
		t.Errorf("after !revoke allowances = %+v", l)
	}
	// Revoked on the host: the held connection closes.
	g, id = chat()
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.RevokeAllowance{ID: id})
	admin.Recv()
	g.C.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := g.C.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("gateway side read = %v, want EOF (the connection closed)", err)
	}
	h.stop()
	if log := readAudit(t, h.cfg.StateDir); !strings.Contains(log, `"reason":"revoked","by":"`+owner+`"`) {
		t.Errorf("audit lacks the chat revocation:\n%s", log)
	}
}

// TestAlwaysProposal: `always` approves the call and writes a grant
// proposal naming the approval and the past calls it would have covered;
// grants/ is unchanged byte for byte; once the proposal is in grants/
// (what bxctl grants apply does), the same call is auto and another file
// still asks; a shell call cannot be answered `always`.
func TestAlwaysProposal(t *testing.T) {
	h := start(t, grants)
	before, _ := os.ReadFile(filepath.Join(h.cfg.GrantsDir, "grants.toml"))
	c := h.readIn(t, 0, report) // an earlier call, refused
	p := c.Recv().(*wire.ToolPending)
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.GetApproval{ID: p.ID})
	admin.Send(&wire.Refuse{ID: p.ID, Code: admin.Recv().(*wire.Approval).Call.Code})
	admin.Recv()
	result(t, c)
	id, msg := h.approveSession(t, 0, wire.ScopeAlways)
	if !strings.Contains(msg, "a grant proposal was written, not applied") || !strings.Contains(msg, fmt.Sprintf("bxctl grants apply %d", id)) {
		t.Errorf("confirmation = %q", msg)
	}
	prop, err := os.ReadFile(filepath.Join(h.cfg.StateDir, "proposals", fmt.Sprintf("%d.toml", id)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("approval %d", id), "Past calls in the audit log it would have covered: 2.", fmt.Sprintf("seq %d (", p.ID),
		`id = "always-` + fmt.Sprint(id) + `"`, `paths = ["/home/owner/Downloads/report.pdf"]`, "standing = true", `mode = "auto"`} {
		if !strings.Contains(string(prop), want) {
			t.Errorf("proposal lacks %q:\n%s", want, prop)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(h.cfg.GrantsDir, "grants.toml")); string(after) != string(before) {
		t.Error("grants/ changed")
	}
	if entries, _ := os.ReadDir(h.cfg.GrantsDir); len(entries) != 1 {
		t.Errorf("grants/ holds %d files, want 1", len(entries))
	}
	if decidedWithout(t, h.readIn(t, 0, report)) {
		t.Error("before the proposal is applied the call ran without asking")
	}
	if err := os.WriteFile(filepath.Join(h.cfg.GrantsDir, "always.toml"), prop, 0o600); err != nil {
		t.Fatal(err)
	}
	if !decidedWithout(t, h.readIn(t, 0, report)) {
		t.Error("with the proposal applied the same call asked")
	}
	if decidedWithout(t, h.readIn(t, 0, `{"path":"/home/owner/Downloads/other.pdf"}`)) {
		t.Error("with the proposal applied another file ran without asking")
	}
	admin = h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.DropProposal{ID: id})
	if a, ok := admin.Recv().(*wire.Answered); !ok || a.Outcome != "dropped" {
		t.Errorf("drop = %#v", a)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.StateDir, "proposals", fmt.Sprintf("%d.toml", id))); !os.IsNotExist(err) {
		t.Errorf("after drop the proposal: %v", err)
	}
}

// TestCourierClosesWhenBrokerdStops: a pending approval does not outlive
// brokerd (the turn waiting on it is told the call failed); its chat
// connection closes with it, which gatewayd answers in the thread
// ("no longer pending ... brokerd restarted ... ask again", gatewayd's
// TestApprovalWithdrawnAndDead), never silence.
func TestCourierClosesWhenBrokerdStops(t *testing.T) {
	gw, conns := fakeGateway(t)
	h := startWith(t, grants, func(c *brokerd.Config) { c.GatewaySocket = gw })
	call := h.readIn(t, 0, report)
	p := call.Recv().(*wire.ToolPending)
	g := next(t, conns)
	g.Recv()
	g.Send(&wire.ApprovalPosted{ID: p.ID, Parts: 1, Answerable: true})
	h.stop()
	g.C.SetDeadline(time.Now().Add(10 * time.Second))
	if v, err := g.C.Recv(); err == nil {
		t.Errorf("gateway side after brokerd stopped got %s, want the connection closed", v.Tag())
	}
	// loopd's side closes too: the turn is told the call failed.
	call.C.SetDeadline(time.Now().Add(10 * time.Second))
	if v, err := call.C.Recv(); err == nil {
		t.Errorf("the waiting call after brokerd stopped got %s, want its connection closed", v.Tag())
	}
}
