package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

// suggestGrants are the grants now: the web grant no longer names
// evil.example, and a deny grant was added over secret.pdf after it was
// approved.
const suggestGrants = `[[grant]]
id = "dl"
tool = "read_file"
paths = ["/home/owner/Downloads"]
max_taint = "secret"
result_class = "private"
mode = "ask"

[[grant]]
id = "no-secret"
tool = "read_file"
paths = ["/home/owner/Downloads/secret.pdf"]
max_taint = "secret"
mode = "deny"

[[grant]]
id = "web"
tool = "http_fetch"
hosts = ["example.com"]
max_taint = "private"
untrusted = true
mode = "ask"

[[grant]]
id = "src"
tool = "shell"
paths = ["/home/owner/src"]
max_taint = "secret"
mode = "ask"

[[grant]]
id = "out"
tool = "write_file"
paths = ["/home/owner/out"]
max_taint = "secret"
mode = "ask"
`

// recordLog writes a recorded audit log: each call asked and approved
// (or refused) n times, one read decided by a session allowance.
func recordLog(t *testing.T, dir string, hostile ...string) {
	t.Helper()
	clock := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	w, err := audit.Open(dir, audit.Options{Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ref := func(id string) *audit.GrantRef { return &audit.GrantRef{ID: id, SHA256: strings.Repeat("ab", 32)} }
	call := func(tool, args, g string, n int, answer audit.Answer) {
		for range n {
			seq, err := w.Append(&audit.Decision{Record: audit.DecisionRecord{Session: "mm-s", Tool: tool, Arguments: json.RawMessage(args),
				Verdict: audit.Verdict{Outcome: audit.Ask, Grant: ref(g), Taint: dataclass.Private}}})
			if err != nil {
				t.Fatal(err)
			}
			v := audit.Verdict{Outcome: audit.Allowed, Grant: ref(g), Taint: dataclass.Private}
			if answer == audit.AnswerRefused {
				v = audit.Verdict{Outcome: audit.Denied, Reason: audit.Refused, Taint: dataclass.Private}
			}
			if _, err := w.Append(&audit.Approval{Decision: seq, Answer: answer, Verdict: v}); err != nil {
				t.Fatal(err)
			}
		}
	}
	call("read_file", `{"path":"/home/owner/Downloads/report.pdf"}`, "dl", 2, audit.AnswerApproved)
	if _, err := w.Append(&audit.Decision{Record: audit.DecisionRecord{Session: "mm-s", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/home/owner/Downloads/report.pdf"}`),
		Verdict: audit.Verdict{Outcome: audit.Allowed, Grant: ref("dl"), Taint: dataclass.Private}, Allowance: 2}}); err != nil {
		t.Fatal(err)
	}
	call("http_fetch", `{"url":"https://example.com/a"}`, "web", 4, audit.AnswerApproved)
	call("http_fetch", `{"url":"https://evil.example/x"}`, "web", 3, audit.AnswerApproved)
	call("read_file", `{"path":"/home/owner/Downloads/secret.pdf"}`, "dl", 3, audit.AnswerApproved)
	call("shell", `{"command":"make test","workdir":"/home/owner/src"}`, "src", 5, audit.AnswerApproved)
	call("shell", `{"command":"bash -lc 'make'","workdir":"/home/owner/src"}`, "src", 3, audit.AnswerApproved)
	call("shell", `{"command":"env sh -c 'make'","workdir":"/home/owner/src"}`, "src", 3, audit.AnswerApproved)
	call("write_file", `{"path":"/home/owner/out/a.txt","content_sha256":"`+strings.Repeat("cd", 32)+`","content_bytes":3}`, "out", 3, audit.AnswerApproved)
	call("read_file", `{"path":"/home/owner/Downloads/other.pdf"}`, "dl", 2, audit.AnswerApproved)
	call("read_file", `{"path":"/home/owner/Downloads/refused.pdf"}`, "dl", 5, audit.AnswerRefused)
	for _, h := range hostile {
		b, _ := json.Marshal(map[string]string{"path": h})
		call("read_file", string(b), "dl", 3, audit.AnswerApproved)
	}
}

// TestSuggestGolden: suggest on a recorded audit log proposes the repeated
// calls, ranked by count, and none of the excluded kinds.
func TestSuggestGolden(t *testing.T) {
	state := t.TempDir()
	gdir, adir := filepath.Join(state, "grants"), filepath.Join(state, "broker", "audit")
	os.MkdirAll(gdir, 0o750)
	os.MkdirAll(adir, 0o700)
	os.WriteFile(filepath.Join(gdir, "g.toml"), []byte(suggestGrants), 0o640)
	recordLog(t, adir)
	code, out, stderr := run("grants", "suggest", "--state", state)
	if code != ExitOK {
		t.Fatalf("suggest = %d %s", code, stderr)
	}
	golden := filepath.Join("testdata", "suggest.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(golden, []byte(out), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil || out != string(want) {
		t.Errorf("suggest output differs from %s (UPDATE_GOLDEN=1 rewrites it):\n%s", golden, out)
	}
	// The proposals it prints are grants brokerd's loader accepts.
	if gs, ps := grant.ParseFile("suggested.toml", []byte(out)); len(ps) > 0 || len(gs) != 2 || !gs[0].Standing() {
		t.Errorf("the suggestions do not parse as two standing grants: %v", ps)
	}
	if strings.Count(out, "[[grant]]") != 2 || strings.Contains(out, `"evil.example"`) || strings.Contains(out, "refused.pdf") || strings.Contains(out, "other.pdf") {
		t.Errorf("suggest proposes other than report.pdf and example.com:\n%s", out)
	}
	if code, _, _ := run("grants", "suggest", "--state", state, "--min", "0"); code != ExitUsage {
		t.Errorf("--min 0 = %d, want usage", code)
	}
}

// hostilePath is a file name that tries to end the TOML string it is
// quoted in and add keys, and to reverse what follows it on a terminal
// (a control character would not reach the audit log: no path has one).
const hostilePath = "/home/owner/Downloads/x\"] mode = \"deny\" # \u2028evil\u202e.pdf"

// TestSuggestWriteGolden: --write has brokerd write each suggestion,
// and only those, as a grant proposal in the format bxctl grants apply
// takes; none of the excluded kinds is sent, grants/ is untouched, a
// hostile file name stays inside its string and its comment, and a
// proposal that exists already is not sent again.
func TestSuggestWriteGolden(t *testing.T) {
	state, got := fakeAdmin(t, &wire.Answered{Outcome: "written", Msg: "grant proposal written"})
	gdir, adir := filepath.Join(state, "grants"), filepath.Join(state, "broker", "audit")
	os.MkdirAll(gdir, 0o750)
	os.MkdirAll(adir, 0o700)
	os.MkdirAll(filepath.Join(state, "proposals"), 0o750)
	os.WriteFile(filepath.Join(gdir, "g.toml"), []byte(suggestGrants), 0o640)
	recordLog(t, adir, hostilePath)
	code, out, stderr := run("grants", "suggest", "--state", state, "--write")
	if code != ExitOK {
		t.Fatalf("suggest --write = %d %s", code, stderr)
	}
	var sent []*wire.WriteProposal
	for len(got) > 0 {
		if m, ok := (<-got).(*wire.WriteProposal); ok {
			sent = append(sent, m)
		}
	}
	var b strings.Builder
	b.WriteString(out)
	for _, m := range sent {
		fmt.Fprintf(&b, "=== write_proposal %d ===\n%s", m.ID, m.Text)
	}
	golden := filepath.Join("testdata", "suggest-write.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(golden, []byte(b.String()), 0o644)
	}
	if want, err := os.ReadFile(golden); err != nil || b.String() != string(want) {
		t.Errorf("suggest --write differs from %s (UPDATE_GOLDEN=1 rewrites it):\n%s", golden, b.String())
	}
	if len(sent) != 3 {
		t.Fatalf("brokerd was sent %d proposals, want 3 (example.com, report.pdf, the hostile name)", len(sent))
	}
	for _, m := range sent {
		gs, ps := grant.ParseFile("p.toml", []byte(m.Text))
		if len(ps) > 0 || len(gs) != 1 || !gs[0].Standing() || gs[0].ID() != fmt.Sprintf("always-%d", m.ID) {
			t.Errorf("proposal %d is not one standing grant always-%d: %v\n%s", m.ID, m.ID, ps, m.Text)
			continue
		}
		if gs[0].Tool() == "read_file" && gs[0].Paths()[0].String() != "/home/owner/Downloads/report.pdf" && gs[0].Paths()[0].String() != hostilePath {
			t.Errorf("proposal %d names %q", m.ID, gs[0].Paths()[0])
		}
		for _, bad := range []string{"evil.example", "secret.pdf", "make", "out/a.txt", "other.pdf", "refused.pdf"} {
			if strings.Contains(m.Text, bad) {
				t.Errorf("proposal %d holds %q, an excluded target:\n%s", m.ID, bad, m.Text)
			}
		}
	}
	if entries, _ := os.ReadDir(gdir); len(entries) != 1 {
		t.Errorf("grants/ holds %d files after --write, want 1", len(entries))
	}
	// As brokerd would have written it, bxctl grants apply takes it.
	first := sent[0]
	os.WriteFile(proposalPath(state, first.ID), []byte(first.Text), 0o640)
	if code, out, stderr := run("grants", "apply", "--state", state, fmt.Sprint(first.ID)); code != ExitOK || !strings.Contains(out, "applied:") {
		t.Errorf("apply of suggested proposal %d = %d %s %s", first.ID, code, out, stderr)
	}
	// A proposal that exists is not sent again.
	os.WriteFile(proposalPath(state, sent[1].ID), []byte(sent[1].Text), 0o640)
	code, out, _ = run("grants", "suggest", "--state", state, "--write")
	if code != ExitOK || !strings.Contains(out, fmt.Sprintf("# already proposed: proposal %d exists", sent[1].ID)) {
		t.Errorf("a second --write = %d:\n%s", code, out)
	}
	for len(got) > 0 {
		if m, ok := (<-got).(*wire.WriteProposal); ok && m.ID == sent[1].ID {
			t.Errorf("proposal %d, which exists, was sent again", m.ID)
		}
	}
}

// TestSuggestWriteRefused: a suggestion brokerd refuses (or brokerd not
// running) fails the command, each saying why, with its runbook entry.
func TestSuggestWriteRefused(t *testing.T) {
	state, _ := fakeAdmin(t, &wire.Error{Op: "write_proposal", Kind: wire.Invalid, Msg: "grant proposal 5 not written: no"})
	gdir, adir := filepath.Join(state, "grants"), filepath.Join(state, "broker", "audit")
	os.MkdirAll(gdir, 0o750)
	os.MkdirAll(adir, 0o700)
	os.WriteFile(filepath.Join(gdir, "g.toml"), []byte(suggestGrants), 0o640)
	recordLog(t, adir)
	code, out, stderr := run("grants", "suggest", "--state", state, "--write")
	if code != ExitFailed || !strings.Contains(out, "# not written: proposal 5: grant proposal 5 not written: no") || !strings.Contains(stderr, "runbook.md#suggest-not-written") {
		t.Errorf("suggest --write refused = %d\n%s\n%s", code, out, stderr)
	}
}
