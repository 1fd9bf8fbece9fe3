package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

const consultBody = `{"model":"m","messages":[{"role":"user","content":"why? \u001b[31m"}],"temperature":0.6,"stream":true}`

// consultState writes a state directory as brokerd would after one
// consult: its decision and result in the audit log, its request (linked
// by hash) and response in the consult log. With logged false the consult
// log is left without the request: an unlogged payload.
func consultState(t *testing.T, logged bool) string {
	t.Helper()
	state := t.TempDir()
	adir := layout.Audit.In(state)
	w, seq := consultDecision(t, adir, "s-1", "why?")
	cl, err := consultlog.Open(layout.ConsultLog.In(state))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if logged {
		h, _ := consultlog.AuditHash(adir, seq)
		rseq, _, err := cl.Request(consultlog.Request{Session: "s-1", Decision: seq, DecisionSHA256: h, Grant: consultlog.GrantRef{ID: "c", SHA256: strings.Repeat("b", 64)},
			Model: "m", URL: "https://api.example.com/v1/chat/completions", Body: consultBody})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Response(consultlog.Response{Request: rseq, Status: 200, Content: "because", Reasoning: "thinking", Finish: "stop"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Append(&audit.Result{Decision: seq, SHA256: strings.Repeat("0a", 32), Size: 3, Class: dataclass.Private, Untrusted: true}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return state
}

// consultDecision opens the audit log in adir (made if missing) and
// appends an allowed consult decision, as brokerd does before a consult.
func consultDecision(t *testing.T, adir, session, question string) (*audit.Writer, int64) {
	t.Helper()
	os.MkdirAll(adir, 0o700)
	w, err := audit.Open(adir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"question": question})
	seq, err := w.Append(&audit.Decision{Record: audit.DecisionRecord{Session: session, Tool: "consult",
		Arguments: args, Verdict: audit.Verdict{Outcome: audit.Allowed, Grant: &audit.GrantRef{ID: "c", SHA256: strings.Repeat("b", 64)}, Taint: dataclass.Private}}})
	if err != nil {
		t.Fatal(err)
	}
	return w, seq
}

func TestConsultLogPrinted(t *testing.T) {
	state := consultState(t, true)
	code, out, _ := run("consult", "log", state)
	if code != ExitOK || !strings.Contains(out, "POST https://api.example.com/v1/chat/completions\n") ||
		!strings.Contains(out, `"temperature":0.6`) || !strings.Contains(out, "answer:\nbecause") || !strings.Contains(out, "reasoning:\nthinking") {
		t.Errorf("consult log = %d:\n%s", code, out)
	}
	if strings.Contains(out, "\x1b") {
		t.Error("an escape sequence from the log reached the terminal")
	}
	code, out, _ = run("audit", "verify", layout.Audit.In(state))
	if code != ExitOK || !strings.Contains(out, "consult log intact: 1 requests, 1 responses") {
		t.Errorf("audit verify = %d, %q", code, out)
	}
}

// TestConsultLogTamperNamed: a changed payload is named to its line by
// bxctl audit verify (and bxctl consult log stops there); an unlogged
// consult is named too.
func TestConsultLogTamperNamed(t *testing.T) {
	state := consultState(t, true)
	p := filepath.Join(layout.ConsultLog.In(state), consultlog.FileName)
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), "why?", "who?", 1)), 0o600)
	code, out, _ := run("audit", "verify", layout.Audit.In(state))
	if code != ExitFailed || !strings.Contains(out, p+":1: ") {
		t.Errorf("audit verify (tampered consult log) = %d, %q; want %s:1 named", code, out, p)
	}
	code, out, _ = run("consult", "log", state)
	if code != ExitFailed || !strings.Contains(out, "does not verify: "+p+":1: ") || strings.Contains(out, "POST") {
		t.Errorf("consult log (tampered) = %d, %q", code, out)
	}
	// The end cut off (the response removed): the audit log's result
	// shows it.
	state = consultState(t, true)
	p = filepath.Join(layout.ConsultLog.In(state), consultlog.FileName)
	b, _ = os.ReadFile(p)
	os.WriteFile(p, b[:strings.IndexByte(string(b), '\n')+1], 0o600)
	if code, out, _ = run("audit", "verify", layout.Audit.In(state)); code != ExitFailed || !strings.Contains(out, "lines removed") {
		t.Errorf("audit verify (tail cut) = %d, %q", code, out)
	}
	state = consultState(t, false)
	os.WriteFile(filepath.Join(layout.ConsultLog.In(state), consultlog.FileName), nil, 0o600)
	code, out, _ = run("audit", "verify", layout.Audit.In(state))
	if code != ExitFailed || !strings.Contains(out, "unlogged payload") {
		t.Errorf("audit verify (unlogged consult) = %d, %q", code, out)
	}
}
