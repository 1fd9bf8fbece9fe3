package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// suggested is the proposal `bxctl grants suggest --write` sends for a
// call recorded as seq id on path.
func suggested(id int64, path string) string {
	return fmt.Sprintf("# Grant proposal from bxctl grants suggest.\n[[grant]]\nid = \"always-%d\"\ntool = \"read_file\"\npaths = [%q]\nmax_taint = \"secret\"\nresult_class = \"private\"\nuntrusted = false\nmode = \"auto\"\nstanding = true\n", id, path)
}

// TestWriteSuggestedProposal: brokerd writes a suggested proposal into
// proposals/ only as exactly one standing grant named after a call its
// audit log asked about, on that call's target; it never replaces one,
// and never touches grants/.
func TestWriteSuggestedProposal(t *testing.T) {
	h := start(t, grants)
	before, _ := os.ReadFile(filepath.Join(h.cfg.GrantsDir, "grants.toml"))
	c := h.readIn(t, 0, report)
	p := c.Recv().(*wire.ToolPending)
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.GetApproval{ID: p.ID})
	admin.Send(&wire.Approve{ID: p.ID, Code: admin.Recv().(*wire.Approval).Call.Code})
	admin.Recv()
	result(t, c)
	const path = "/home/owner/Downloads/report.pdf"
	good := suggested(p.ID, path)
	write := func(id int64, text string) (*wire.Answered, *wire.Error) {
		admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
		admin.Send(&wire.WriteProposal{ID: id, Text: text})
		switch v := admin.Recv().(type) {
		case *wire.Answered:
			return v, nil
		case *wire.Error:
			return nil, v
		default:
			t.Fatalf("write_proposal answered %s", v.Tag())
		}
		return nil, nil
	}
	file := filepath.Join(h.cfg.StateDir, "proposals", fmt.Sprintf("%d.toml", p.ID))
	for _, tt := range []struct {
		name string
		id   int64
		text string
		want string
	}{
		{"not standing", p.ID, strings.Replace(good, "standing = true\n", "", 1), "not one standing grant"},
		{"another id", p.ID, strings.Replace(good, fmt.Sprintf("always-%d", p.ID), "dl", 1), "not one standing grant"},
		{"two grants", p.ID, good + strings.Replace(good, "# Grant", "# And", 1), "not one standing grant"},
		{"a shell line", p.ID, strings.Replace(strings.Replace(good, `"read_file"`, `"shell"`, 1), `paths = ["`+path+`"]`, `paths = ["/bin"]`, 1), "does not parse"},
		{"a directory", p.ID, suggested(p.ID, "/home/owner/Downloads"), "no asked or allowance-decided read_file call"},
		{"another file", p.ID, suggested(p.ID, "/home/owner/Downloads/other.pdf"), "no asked or allowance-decided read_file call"},
		{"no such call", p.ID + 100, suggested(p.ID+100, path), "no asked or allowance-decided read_file call"},
		{"too long", p.ID, good + "# " + strings.Repeat("x", wire.MaxProposalText) + "\n", "at most"},
	} {
		if a, e := write(tt.id, tt.text); e == nil || !strings.Contains(e.Msg, tt.want) || !strings.Contains(e.Msg, "runbook.md#proposal-refused") {
			t.Errorf("%s: answered %+v %+v, want refused with %q", tt.name, a, e, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Dir(file)); err == nil {
		if entries, _ := os.ReadDir(filepath.Dir(file)); len(entries) != 0 {
			t.Errorf("a refused proposal left %d files in proposals/", len(entries))
		}
	}
	if a, e := write(p.ID, good); e != nil || a.Outcome != "written" || !strings.Contains(a.Msg, fmt.Sprintf("bxctl grants apply %d", p.ID)) {
		t.Fatalf("a good proposal: %+v %+v", a, e)
	}
	got, err := os.ReadFile(file)
	if err != nil || string(got) != good {
		t.Fatalf("proposals/%d.toml = %q, %v", p.ID, got, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	if _, e := write(p.ID, strings.Replace(good, "untrusted = false", "untrusted = true", 1)); e == nil || !strings.Contains(e.Msg, "exists already") {
		t.Errorf("a second write of proposal %d: %+v, want refused", p.ID, e)
	}
	if got, _ := os.ReadFile(file); string(got) != good {
		t.Error("a second write replaced the proposal")
	}
	if after, _ := os.ReadFile(filepath.Join(h.cfg.GrantsDir, "grants.toml")); string(after) != string(before) {
		t.Error("grants/ changed")
	}
	if entries, _ := os.ReadDir(h.cfg.GrantsDir); len(entries) != 1 {
		t.Errorf("grants/ holds %d files, want 1", len(entries))
	}
}

// TestConsultSessionRefused is the hostile case: `session` (or `session
// dir`, or `always`) on a consult is refused, answers nothing and makes
// no allowance or proposal: the approval stays pending, so the owner
// still reads this payload, and the next consult asks again.
func TestConsultSessionRefused(t *testing.T) {
	h := startWith(t, consultGrants, func(c *brokerd.Config) { c.Consult = &brokerd.Consult{Endpoint: "https://api.example.com/v1"} })
	c := consultCall(h, t)
	p, ok := c.Recv().(*wire.ToolPending)
	if !ok {
		t.Fatal("the consult did not ask")
	}
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.GetApproval{ID: p.ID})
	code := admin.Recv().(*wire.Approval).Call.Code
	for _, scope := range []wire.AnswerScope{wire.ScopeSession, wire.ScopeSessionDir, wire.ScopeAlways} {
		admin.Send(&wire.Approve{ID: p.ID, Code: code, Scope: scope})
		e, ok := admin.Recv().(*wire.Error)
		if !ok || !strings.Contains(e.Msg, "allowance-refused") || !strings.Contains(e.Msg, "nothing was answered") {
			t.Errorf("%q on a consult = %#v, want refused", scope, e)
		}
		admin.Send(&wire.GetApproval{ID: p.ID})
		if _, ok := admin.Recv().(*wire.Approval); !ok {
			t.Fatalf("%q on a consult answered the approval", scope)
		}
	}
	if l := h.allowances(t); len(l) != 0 {
		t.Errorf("allowances after the refused answers: %+v", l)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.StateDir, "proposals", fmt.Sprintf("%d.toml", p.ID))); !os.IsNotExist(err) {
		t.Errorf("a proposal for a consult: %v", err)
	}
}
