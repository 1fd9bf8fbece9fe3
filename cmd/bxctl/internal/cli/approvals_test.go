package cli

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// fakeAdmin answers every admin.sock message with answer and records what
// it was sent.
func fakeAdmin(t *testing.T, answer strict.Variant) (string, chan strict.Variant) {
	t.Helper()
	state := t.TempDir()
	got := make(chan strict.Variant, 4)
	on := func(v strict.Variant) strict.Variant { got <- v; return answer }
	sockettest.Serve(t, layout.AdminRun.In(state), &wire.Admin, rpc.NewServer(&wire.Admin, slog.New(slog.DiscardHandler),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.ListApprovals) strict.Variant { return on(m) }),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.GetApproval) strict.Variant { return on(m) }),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.Approve) strict.Variant { return on(m) }),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.Refuse) strict.Variant { return on(m) }),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.ListAllowances) strict.Variant { return on(m) }),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.RevokeAllowance) strict.Variant { return on(m) }),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.DropProposal) strict.Variant { return on(m) }),
		rpc.On(func(_ context.Context, _ sockets.Peer, m *wire.WriteProposal) strict.Variant { return on(m) })).Serve)
	return state, got
}

// TestApprovalsShowEverything: a path holding U+202E (which reverses what
// follows), "\u002f" spelled out, and a newline is shown so that each is
// visible and none changes what the owner reads.
func TestApprovalsShowEverything(t *testing.T) {
	args := `{"path":"/home/o/\u202egdp.exe\n\\u002fetc/passwd"}`
	state, _ := fakeAdmin(t, &wire.Approvals{Calls: []wire.PendingCall{{ID: 7, Session: "s1", Tool: "read_file", Arguments: []byte(args), Expires: "2026-11-30T10:00:00Z", Code: "k7m2qx"}}})
	code, out, stderr := run("approvals", "--state", state)
	if code != ExitOK {
		t.Fatalf("approvals = %d, %s", code, stderr)
	}
	for _, r := range out {
		if r == '\u202e' {
			t.Fatalf("output holds a raw U+202E: %q", out)
		}
	}
	for _, want := range []string{"approval 7: read_file in session s1", "code k7m2qx", `\u202egdp.exe`, `\n`, `\\u002fetc`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n") != 3 {
		t.Errorf("the argument's newline reached the screen:\n%s", out)
	}
}

func TestApproveAndRefuseSendTheIDAndCode(t *testing.T) {
	state, got := fakeAdmin(t, &wire.Answered{ID: 7, Outcome: "approved", Msg: "approved"})
	if code, out, _ := run("approve", "--state", state, "7", "K7M2QX"); code != ExitOK || !strings.Contains(out, "approval 7: approved") {
		t.Errorf("approve = %d %q", code, out)
	}
	if a, ok := (<-got).(*wire.Approve); !ok || a.ID != 7 || a.Code != "k7m2qx" {
		t.Errorf("brokerd got %#v", a)
	}
	if code, _, _ := run("deny", "--state", state, "7", "k7m2qx", "not", "now"); code != ExitOK {
		t.Errorf("deny = %d", code)
	}
	if r, ok := (<-got).(*wire.Refuse); !ok || r.ID != 7 || r.Code != "k7m2qx" || r.Reason != "not now" {
		t.Errorf("brokerd got %#v", r)
	}
	for _, bad := range [][]string{{"approve"}, {"approve", "7"}, {"approve", "y", "k7m2qx"}, {"approve", "0", "k7m2qx"}, {"approve", "7", "k7m2qx", "8"}, {"approve", "7", "8"}, {"refuse"}, {"refuse", "7"}, {"refuse", "7", "not-a-code"}} {
		if code, _, _ := run(append(bad, "--state", state)...); code != ExitUsage {
			t.Errorf("bxctl %v = %d, want usage", bad, code)
		}
	}
	if code, _, stderr := run("approvals", "--state", filepath.Join(t.TempDir(), "none")); code != ExitFailed || !strings.Contains(stderr, "brokerd is not running") {
		t.Errorf("approvals without brokerd = %d %q", code, stderr)
	}
}

func TestApprovalByID(t *testing.T) {
	state, got := fakeAdmin(t, &wire.Approval{Call: wire.PendingCall{ID: 9, Session: "s1", Tool: "shell", Arguments: []byte(`{"command":"ls"}`), Expires: "2026-11-30T10:00:00Z"}})
	code, out, _ := run("approvals", "--state", state, "9")
	if code != ExitOK || !strings.Contains(out, "approval 9: shell in session s1") || !strings.Contains(out, `{"command":"ls"}`) {
		t.Errorf("approvals 9 = %d %q", code, out)
	}
	if g, ok := (<-got).(*wire.GetApproval); !ok || g.ID != 9 {
		t.Errorf("brokerd got %#v, want get_approval 9", g)
	}
}
