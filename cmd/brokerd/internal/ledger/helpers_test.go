package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

type dirs struct{ state, audit string }

func newDirs(t *testing.T) dirs {
	t.Helper()
	root := t.TempDir()
	d := dirs{state: filepath.Join(root, "broker", "sessions"), audit: filepath.Join(root, "audit")}
	if err := os.MkdirAll(d.audit, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func open(t *testing.T, d dirs) *Ledger {
	t.Helper()
	l, err := Open(d.state, d.audit, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// outcome returns a DecideFunc that records the given outcome.
func outcome(o audit.Outcome) DecideFunc { return outcomeOf("read_file", o) }

// outcomeOf returns a DecideFunc that records the outcome for tool.
func outcomeOf(tool string, o audit.Outcome) DecideFunc {
	return func(policy.Session, error) audit.DecisionRecord {
		r := audit.DecisionRecord{Tool: tool, Arguments: json.RawMessage(`{"path":"/x"}`), Verdict: audit.Verdict{Outcome: o}}
		if o == audit.Denied {
			r.Reason = audit.NoGrant
		}
		return r
	}
}

func approve(policy.Session, error) audit.Approval {
	return audit.Approval{Answer: audit.AnswerApproved, Verdict: audit.Verdict{Outcome: audit.Allowed}}
}

func refuse(policy.Session, error) audit.Approval {
	return audit.Approval{Answer: audit.AnswerRefused, Verdict: audit.Verdict{Outcome: audit.Denied, Reason: audit.Refused}}
}

func result(seq int64, c dataclass.Class, untrusted bool) audit.Result {
	return audit.Result{Decision: seq, SHA256: strings.Repeat("ab", 32), Size: 3, Class: c, Untrusted: untrusted}
}

// run decides an allowed call for id and records its result.
func run(t *testing.T, l *Ledger, id string, c dataclass.Class, untrusted bool) {
	t.Helper()
	runTool(t, l, id, "read_file", c, untrusted)
}

// runTool decides an allowed call of tool for id and records its result.
func runTool(t *testing.T, l *Ledger, id, tool string, c dataclass.Class, untrusted bool) {
	t.Helper()
	seq, err := l.Decide(id, outcomeOf(tool, audit.Allowed))
	if err != nil {
		t.Fatalf("Decide(%s): %v", id, err)
	}
	if _, err := l.Result(result(seq, c, untrusted)); err != nil {
		t.Fatalf("Result(%d): %v", seq, err)
	}
}

func state(t *testing.T, l *Ledger, id string) policy.Session {
	t.Helper()
	s, err := l.Session(id)
	if err != nil {
		t.Fatalf("Session(%s): %v", id, err)
	}
	return s
}

// files reads every file in dir by name, the lock and mark excluded.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.Name() == lockFile || e.Name() == cleanFile {
			continue
		}
		if e.IsDir() {
			out[e.Name()] = "(directory)"
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrPermission) {
			// A file planted unreadable (as any user but root): its
			// mode and size stand for its content.
			fi, serr := os.Stat(filepath.Join(dir, e.Name()))
			if serr != nil {
				t.Fatal(serr)
			}
			out[e.Name()] = fmt.Sprintf("(unreadable, mode %v, %d bytes)", fi.Mode(), fi.Size())
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// tools are the tools the random drivers call: two hand the session
// recalled memory ([Recalls]), two do not.
var tools = []string{"read_file", "recall", "ask_memory", "memory"}

// failingLog stands in for the audit writer: once fail is set, every
// append fails as a failed write does.
type failingLog struct {
	auditLog
	fail bool
}

func (f *failingLog) Append(r audit.Record) (int64, error) {
	if f.fail {
		return 0, fmt.Errorf("append audit record: planted: %w", audit.ErrUnavailable)
	}
	return f.auditLog.Append(r)
}

func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, audit.ErrUnavailable) {
		t.Errorf("%s = %v, want an error wrapping audit.ErrUnavailable", what, err)
	}
}
