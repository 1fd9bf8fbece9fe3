package cli

import (
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func TestApproveSession(t *testing.T) {
	for _, tt := range []struct {
		flag string
		want wire.AnswerScope
	}{{"--session", wire.ScopeSession}, {"-session", wire.ScopeSession}, {"--session-dir", wire.ScopeSessionDir}} {
		state, got := fakeAdmin(t, &wire.Answered{ID: 7, Outcome: "approved", Msg: "approved: session allowance 7 made"})
		if code, out, _ := run("approve", "--state", state, "7", "k7m2qx", tt.flag); code != ExitOK || !strings.Contains(out, "session allowance 7 made") {
			t.Errorf("approve %s = %d %q", tt.flag, code, out)
		}
		if a, ok := (<-got).(*wire.Approve); !ok || a.Scope != tt.want {
			t.Errorf("approve %s: brokerd got %#v, want scope %q", tt.flag, a, tt.want)
		}
	}
}

func TestAllowances(t *testing.T) {
	state, got := fakeAdmin(t, &wire.Allowances{Allowances: []wire.AllowanceInfo{{ID: 4, Session: "mm-x", Tool: "read_file",
		Scope: "read_file of exactly /home/owner/a\u202e", Grant: "dl", Approver: "mattermost:u", Made: "2026-11-30T10:00:00Z", Expires: "2026-11-30T22:00:00Z"}}})
	code, out, _ := run("allowances", "--state", state)
	if code != ExitOK || !strings.Contains(out, "allowance 4: session mm-x") || !strings.Contains(out, `read_file of exactly /home/owner/a\u202e`) {
		t.Errorf("allowances = %d %q", code, out)
	}
	if _, ok := (<-got).(*wire.ListAllowances); !ok {
		t.Error("brokerd was not asked for the list")
	}
	state, got = fakeAdmin(t, &wire.Answered{ID: 4, Outcome: "revoked", Msg: "session allowance 4 revoked"})
	if code, out, _ := run("allowances", "--state", state, "revoke", "4"); code != ExitOK || !strings.Contains(out, "revoked") {
		t.Errorf("allowances revoke = %d %q", code, out)
	}
	if r, ok := (<-got).(*wire.RevokeAllowance); !ok || r.ID != 4 {
		t.Errorf("brokerd got %#v", r)
	}
	for _, bad := range [][]string{{"revoke"}, {"revoke", "x"}, {"revoke", "0"}, {"drop", "4"}} {
		if code, _, _ := run(append([]string{"allowances", "--state", state}, bad...)...); code != ExitUsage {
			t.Errorf("allowances %v = %d, want usage", bad, code)
		}
	}
}
