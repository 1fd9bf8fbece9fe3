package broker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

const grants = `
[[grant]]
id = "notes-read"
tool = "read_file"
paths = ["/home/owner/notes"]
max_taint = "secret"
mode = "auto"

[[grant]]
id = "downloads-read"
tool = "read_file"
paths = ["/home/owner/Downloads"]
max_taint = "secret"
mode = "ask"

[[grant]]
id = "keys-deny"
tool = "read_file"
paths = ["/home/owner/.ssh"]
max_taint = "secret"
mode = "deny"
`

type harness struct {
	cfg  brokerd.Config
	stop func()
}

func start(t *testing.T, grantText string) *harness {
	t.Helper()
	return startWith(t, grantText, func(*brokerd.Config) {})
}

func startWith(t testing.TB, grantText string, edit func(*brokerd.Config)) *harness {
	t.Helper()
	return startTuned(t, grantText, edit, nil)
}

// startTuned is startWith whose runner settings tune adjusts (run).
func startTuned(t testing.TB, grantText string, edit func(*brokerd.Config), tune func(*runner.Config)) *harness {
	t.Helper()
	root := t.TempDir()
	cfg := brokerd.Config{StateDir: filepath.Join(root, "state"), GrantsDir: filepath.Join(root, "grants"),
		BrokerSocketDir: filepath.Join(root, "run", "broker"), AdminSocketDir: filepath.Join(root, "run", "admin"), ApprovalTTLMS: 60000}
	edit(&cfg)
	for _, d := range []string{cfg.StateDir + "/broker/audit", cfg.GrantsDir} {
		os.MkdirAll(d, 0o700)
	}
	os.WriteFile(filepath.Join(cfg.GrantsDir, "grants.toml"), []byte(grantText), 0o600)
	for _, d := range []string{cfg.BrokerSocketDir, cfg.AdminSocketDir} {
		if err := sockets.MakeDir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{cfg: cfg}
	h.stop = sockettest.Start(t, "brokerd", filepath.Join(cfg.AdminSocketDir, wire.Admin.Name), func(ctx context.Context) error {
		return run(ctx, slog.New(slog.DiscardHandler), cfg, false, tune)
	})
	return h
}

type conn = sockettest.Conn

func (h *harness) dial(t testing.TB, socketDir string, s *wire.Socket) *conn {
	return sockettest.Dial(t, s, filepath.Join(socketDir, s.Name))
}

func (h *harness) call(t testing.TB, tool, args string) *conn {
	c := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	c.Send(&wire.ToolRequest{Session: "s1", CallID: "c1", Tool: tool, Arguments: []byte(args)})
	return c
}

func result(t testing.TB, c *conn) *wire.ToolResult {
	t.Helper()
	r, ok := c.Recv().(*wire.ToolResult)
	if !ok {
		t.Fatal("want a tool_result")
	}
	return r
}

func TestDecisions(t *testing.T) {
	h := start(t, grants)
	for _, tt := range []struct{ tool, args, status, want string }{
		{"read_file", `{"path":"/home/owner/notes/a.md"}`, "failed", "tool containers are not configured"},
		{"call_tool", `{"name":"read_file","arguments":{"path":"/home/owner/notes/a.md"}}`, "failed", "tool containers are not configured"},
		{"read_file", `{"path":"/etc/shadow"}`, "denied", "no grant allows it"},
		{"read_file", `{"path":"/home/owner/.ssh/id_ed25519"}`, "denied", `denied by grant "keys-deny"`},
		{"read_file", `{"path":"/home/owner/notes/../.ssh/id"}`, "denied", "invalid arguments"},
		{"exec", `{}`, "denied", "no tool of that name"},
	} {
		r := result(t, h.call(t, tt.tool, tt.args))
		if string(r.Status) != tt.status || !strings.Contains(r.Output, tt.want) {
			t.Errorf("%s %s = %+v, want %s containing %q", tt.tool, tt.args, r, tt.status, tt.want)
		}
	}
	h.stop()
	rep := audit.Verify(filepath.Join(h.cfg.StateDir, "broker", "audit"))
	if !rep.OK() || rep.Records != 6 {
		t.Errorf("audit after 6 requests: %s (%d records), want 6 decision records", rep.Summary(), rep.Records)
	}
}

func TestApproveAndRefuse(t *testing.T) {
	h := start(t, grants)
	var codes []string
	for _, answer := range []string{"refuse", "approve"} {
		c := h.call(t, "read_file", `{"path":"/home/owner/Downloads/report.pdf"}`)
		p, ok := c.Recv().(*wire.ToolPending)
		if !ok || p.Tool != "read_file" {
			t.Fatalf("first answer = %#v, want tool_pending", p)
		}
		admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
		admin.Send(&wire.ListApprovals{})
		list := admin.Recv().(*wire.Approvals)
		if len(list.Calls) != 1 || list.Calls[0].ID != p.ID || string(list.Calls[0].Arguments) != `{"path":"/home/owner/Downloads/report.pdf"}` {
			t.Fatalf("approvals = %+v", list)
		}
		code := list.Calls[0].Code
		if _, err := wire.ParseApprovalCode(code); err != nil {
			t.Fatalf("approval code %q: %v", code, err)
		}
		codes = append(codes, code)
		// The id alone, or another code, answers nothing (an imitation
		// of the approval post cannot show the code).
		wrong := "000000"
		if code == wrong {
			wrong = "000001"
		}
		for _, bad := range []strict.Variant{&wire.Approve{ID: p.ID}, &wire.Approve{ID: p.ID, Code: wrong}, &wire.Refuse{ID: p.ID, Code: "x", Reason: "no"}} {
			admin.Send(bad)
			if e, ok := admin.Recv().(*wire.Error); !ok || e.Kind != wire.Denied || !strings.Contains(e.Msg, "approval-code-wrong") {
				t.Fatalf("%s with a wrong code = %#v, want denied", bad.Tag(), e)
			}
		}
		admin.Send(&wire.GetApproval{ID: p.ID})
		if g, ok := admin.Recv().(*wire.Approval); !ok || g.Call.Code != code {
			t.Fatalf("after wrong codes the approval is %#v, want still pending", g)
		}
		if answer == "refuse" {
			admin.Send(&wire.Refuse{ID: p.ID, Code: code, Reason: "not now"})
		} else {
			admin.Send(&wire.Approve{ID: p.ID, Code: strings.ToUpper(code)})
		}
		if a, ok := admin.Recv().(*wire.Answered); !ok || a.ID != p.ID {
			t.Fatalf("admin answer = %#v", a)
		}
		r := result(t, c)
		want := map[string]string{"refuse": "refused by the owner: not now", "approve": "tool containers are not configured"}[answer]
		if !strings.Contains(r.Output, want) {
			t.Errorf("after %s: %+v, want %q", answer, r, want)
		}
		admin.Send(&wire.Approve{ID: p.ID, Code: code})
		if e, ok := admin.Recv().(*wire.Error); !ok || !strings.Contains(e.Msg, "not pending") {
			t.Errorf("a second answer = %#v, want not pending", e)
		}
	}
	h.stop()
	if rep := audit.Verify(filepath.Join(h.cfg.StateDir, "broker", "audit")); !rep.OK() || rep.Records != 4 {
		t.Errorf("audit: %s (%d records), want 2 asks and 2 answers", rep.Summary(), rep.Records)
	}
	log := readAudit(t, h.cfg.StateDir)
	for _, c := range codes {
		if strings.Contains(log, `"`+c+`"`) {
			t.Errorf("the audit log holds approval code %q:\n%s", c, log)
		}
	}
}

// TestSocketsRefuseEachOthersMessages: a forged approval from loopd's side
// on broker.sock, and a tool request on admin.sock, are both refused.
func TestSocketsRefuseEachOthersMessages(t *testing.T) {
	h := start(t, grants)
	c := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	c.Send(&wire.Approve{ID: 1})
	if e, ok := c.Recv().(*wire.Error); !ok || e.Kind != wire.Forbidden {
		t.Errorf("approve on broker.sock = %#v, want forbidden", e)
	}
	a := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	a.Send(&wire.ToolRequest{Session: "s1", CallID: "c1", Tool: "read_file", Arguments: []byte(`{"path":"/home/owner/notes/a"}`)})
	if e, ok := a.Recv().(*wire.Error); !ok || e.Kind != wire.Forbidden {
		t.Errorf("tool_request on admin.sock = %#v, want forbidden", e)
	}
	h.stop()
	if rep := audit.Verify(filepath.Join(h.cfg.StateDir, "broker", "audit")); rep.Records != 0 {
		t.Errorf("refused messages made %d audit records, want none (they are no decisions)", rep.Records)
	}
}

func TestInvalidGrantsDenyAll(t *testing.T) {
	h := start(t, grants+"\n[[grant]]\nid = \"bad\"\ntool = \"read_file\"\npaths = [\"/\"]\nmax_taint = \"secret\"\nmode = \"auto\"\n")
	r := result(t, h.call(t, "read_file", `{"path":"/home/owner/notes/a.md"}`))
	if r.Status != wire.StatusDenied || !strings.Contains(r.Output, "grants are invalid") {
		t.Errorf("with an invalid grant file: %+v", r)
	}
}
