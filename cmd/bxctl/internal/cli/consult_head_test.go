package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
)

// failedConsult adds to state a consult that failed before its container
// ran, as brokerd leaves one: its allowed decision in the audit log and
// no result there; its request and a response with the error in the
// consult log. It returns the decision's seq and line hash.
func failedConsult(t *testing.T, state string) (int64, string) {
	t.Helper()
	adir := layout.Audit.In(state)
	w, seq := consultDecision(t, adir, "s-2", "again?")
	w.Close()
	h, err := consultlog.AuditHash(adir, seq)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := consultlog.Open(layout.ConsultLog.In(state))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rseq, _, err := cl.Request(failedRequest(seq, h, consultBody))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Response(consultlog.Response{Request: rseq, Error: "the call could not be run: create container: no space left on device"}); err != nil {
		t.Fatal(err)
	}
	return seq, h
}

func failedRequest(seq int64, h, body string) consultlog.Request {
	return consultlog.Request{Session: "s-2", Decision: seq, DecisionSHA256: h, Grant: consultlog.GrantRef{ID: "c", SHA256: strings.Repeat("b", 64)},
		Model: "m", URL: "https://api.example.com/v1/chat/completions", Body: body}
}

func consultLines(t *testing.T, state string) (string, []string) {
	t.Helper()
	p := filepath.Join(layout.ConsultLog.In(state), consultlog.FileName)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// forge writes a consult log as a forger who knows the chain's rules
// would: fn writes it, through brokerd's own writer, in a scratch state
// directory (with the real head record, if there is one), and only its
// consult.jsonl is copied over the real one.
func forge(t *testing.T, state string, fromScratch bool, fn func(w *consultlog.Writer)) {
	t.Helper()
	real := layout.ConsultLog.In(state)
	scratch := filepath.Join(t.TempDir(), "consult")
	os.MkdirAll(scratch, 0o700)
	if !fromScratch {
		for _, p := range [][2]string{{filepath.Join(real, consultlog.FileName), filepath.Join(scratch, consultlog.FileName)}, {audit.HeadPath(real), audit.HeadPath(scratch)}} {
			if b, err := os.ReadFile(p[0]); err == nil {
				os.WriteFile(p[1], b, 0o600)
			}
		}
	}
	w, err := consultlog.Open(scratch)
	if err != nil {
		t.Fatal(err)
	}
	fn(w)
	w.Close()
	b, err := os.ReadFile(filepath.Join(scratch, consultlog.FileName))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(real, consultlog.FileName), b, 0o600)
}

// TestConsultLogCutNamed: each edit below leaves a consult log whose
// chain and audit links hold, and each passed `bxctl audit verify`: the
// newest consult failed before its container ran, so the audit log holds
// no result that would show its lines missing. Each now fails, by the
// consult log's head record, with its runbook entry; `bxctl consult log`
// prints what is there and names the same problem.
func TestConsultLogCutNamed(t *testing.T) {
	for _, tt := range []struct {
		name string
		only bool // the failed consult is the log's only one
		edit func(t *testing.T, state string)
		want string
	}{
		{name: "drop the newest record", want: "ends at seq 3, but brokerd wrote up to seq 4", edit: func(t *testing.T, state string) {
			p, ls := consultLines(t, state)
			os.WriteFile(p, []byte(strings.Join(ls[:3], "\n")+"\n"), 0o600)
		}},
		{name: "a failed consult cut off", want: "ends at seq 2, but brokerd wrote up to seq 4", edit: func(t *testing.T, state string) {
			p, ls := consultLines(t, state)
			os.WriteFile(p, []byte(strings.Join(ls[:2], "\n")+"\n"), 0o600)
		}},
		{name: "delete the whole file", only: true, want: "ends at seq 0, but brokerd wrote up to seq 2", edit: func(t *testing.T, state string) {
			p, _ := consultLines(t, state)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "append a well-chained forged record", want: "see docs/runbook.md#consult-head-differs", edit: func(t *testing.T, state string) {
			seq, h := lastDecision(t, state)
			forge(t, state, false, func(w *consultlog.Writer) {
				if _, _, err := w.Request(failedRequest(seq, h, `{"forged":1}`)); err != nil {
					t.Fatal(err)
				}
			})
		}},
		{name: "re-chain from an edited record", only: true, want: "see docs/runbook.md#consult-head-differs", edit: func(t *testing.T, state string) {
			seq, h := lastDecision(t, state)
			forge(t, state, true, func(w *consultlog.Writer) {
				rseq, _, err := w.Request(failedRequest(seq, h, strings.Replace(consultBody, "why?", "who?", 1)))
				if err != nil {
					t.Fatal(err)
				}
				w.Response(consultlog.Response{Request: rseq, Error: "the call could not be run: create container: no space left on device"})
			})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			if !tt.only {
				state = consultState(t, true)
			}
			failedConsult(t, state)
			anchors := filepath.Join(t.TempDir(), "anchors.jsonl")
			adir := layout.Audit.In(state)
			if code, out, _ := run("audit", "verify", "--anchors", anchors, adir); code != ExitOK || !strings.Contains(out, "consult log intact") {
				t.Fatalf("audit verify (intact) = %d, %q", code, out)
			}
			tt.edit(t, state)
			if rep := consultlog.Verify(layout.ConsultLog.In(state), adir); !rep.OK() {
				t.Fatalf("the edit broke the chain or a link (%v): not what the test is of", rep.Problem)
			}
			code, out, _ := run("audit", "verify", "--anchors", anchors, adir)
			if code != ExitFailed || !strings.Contains(out, "consult log: ") || !strings.Contains(out, tt.want) || !containsAny(out, consultlog.Head.See) {
				t.Fatalf("audit verify after %s = %d, %q; want %q", tt.name, code, out, tt.want)
			}
			code, out, _ = run("consult", "log", state)
			if code != ExitFailed || !strings.Contains(out, "consult log does not verify: ") || !strings.Contains(out, tt.want) {
				t.Fatalf("consult log after %s = %d, %q", tt.name, code, out)
			}
		})
	}
}

// containsAny reports whether out names one of the runbook entries in see.
func containsAny(out string, see map[audit.HeadKind]string) bool {
	for k, s := range see {
		if k != 0 && strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// lastDecision is the seq and hash of the audit log's last line (the
// failed consult's decision).
func lastDecision(t *testing.T, state string) (int64, string) {
	t.Helper()
	r := audit.Verify(layout.Audit.In(state))
	return r.LastSeq, r.Head
}

// TestConsultLogAnchored: `bxctl audit anchor` anchors the consult log's
// end too, in the same file, keyed by its own directory; when its end is
// cut and brokerd's head record made to agree (as a writer with brokerd's
// uid could), only that anchor shows it. A consult log that fails is not
// anchored, and neither is the audit log with it.
func TestConsultLogAnchored(t *testing.T) {
	state := consultState(t, true)
	failedConsult(t, state)
	adir, cdir := layout.Audit.In(state), layout.ConsultLog.In(state)
	anchors := filepath.Join(t.TempDir(), "anchors.jsonl")
	code, out, stderr := run("audit", "anchor", "--anchors", anchors, adir)
	if code != ExitOK || !strings.Contains(out, "anchored seq 4, hash ") || !strings.Contains(out, " of "+cdir+" in ") {
		t.Fatalf("audit anchor = %d\n%s%s", code, out, stderr)
	}
	b, _ := os.ReadFile(anchors)
	all, err := audit.ParseAnchors(b)
	if err != nil || len(all) != 2 || all[0].Log != adir || all[1].Log != cdir || all[1].Seq != 4 {
		t.Fatalf("anchors = %+v, %v", all, err)
	}
	if code, out, _ := run("audit", "verify", "--anchors", anchors, adir); code != ExitOK || !strings.Contains(out, "consult log intact") || !strings.Contains(out, "ends at brokerd's head record (seq 4); 1 anchors hold") {
		t.Fatalf("audit verify (anchored) = %d, %q", code, out)
	}
	p, ls := consultLines(t, state)
	os.WriteFile(p, []byte(strings.Join(ls[:2], "\n")+"\n"), 0o600)
	if _, _, err := consultlog.AdoptHead(cdir, time.Now()); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run("audit", "verify", "--anchors", anchors, adir)
	if code != ExitFailed || !strings.Contains(out, "consult log: anchor of ") || !strings.Contains(out, "is past the log's end at seq 2") {
		t.Fatalf("audit verify (cut, head adopted) = %d, %q", code, out)
	}
	if code, _, stderr := run("audit", "anchor", "--anchors", anchors, adir); code != ExitFailed || !strings.Contains(stderr, "neither log's end is anchored") {
		t.Fatalf("audit anchor with a failing consult log = %d, %q", code, stderr)
	}
}
