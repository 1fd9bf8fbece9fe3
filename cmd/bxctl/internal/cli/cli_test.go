package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
)

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsage(t *testing.T) {
	if code, _, stderr := run(); code != ExitUsage || !strings.Contains(stderr, "selftest") {
		t.Errorf("bxctl = %d, %q; want usage listing selftest", code, stderr)
	}
	if code, _, stderr := run("nope"); code != ExitUsage || !strings.Contains(stderr, `unknown command "nope"`) {
		t.Errorf("bxctl nope = %d, %q", code, stderr)
	}
	if code, _, _ := run("help"); code != ExitOK {
		t.Errorf("bxctl help = %d", code)
	}
	if code, _, stderr := run("selftest"); code != ExitUsage || !strings.Contains(stderr, "--llama URL is required") {
		t.Errorf("bxctl selftest = %d, %q", code, stderr)
	}
}

func scripted(t *testing.T, opts fake.Options) *fake.Server {
	srv := fake.New(t, opts)
	srv.Script(
		fake.Reply{Reasoning: "Time.", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}},
		fake.Reply{Reasoning: "Greet.", Content: "Hello."},
		fake.Reply{Reasoning: "Again.", Content: "Hello again."},
	)
	return srv
}

func TestSelftestAgainstFake(t *testing.T) {
	const tmpl = "{# template #}"
	sum := sha256.Sum256([]byte(tmpl))
	srv := scripted(t, fake.Options{Slots: 2, NCtx: 8192, ChatTemplate: tmpl})
	code, out, stderr := run("selftest", "--llama", srv.URL(), "--n-ctx", "8192", "--slots", "2", "--template-sha256", hex.EncodeToString(sum[:]), "--max-tokens", "4096")
	if code != ExitOK {
		t.Fatalf("selftest = %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"PASS server", "PASS context   8192 tokens per slot, as configured", "PASS settings", "PASS tool-call clock called", "PASS cache     turn 2 reused",
		"PASS fit       a one-line system message and a one-word message (no baseline given) is"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSelftestFailsAndSaysWhy(t *testing.T) {
	srv := scripted(t, fake.Options{NCtx: 4096, DropEarlierThinking: true})
	code, out, _ := run("selftest", "--llama", srv.URL(), "--n-ctx", "8192")
	if code != ExitFailed {
		t.Fatalf("selftest = %d, want %d\n%s", code, ExitFailed, out)
	}
	for _, want := range []string{"FAIL context   configured 8192 tokens per slot, /props reports 4096", "FAIL cache     turn 2 reused", "see docs/runbook.md#selftest-cache",
		"FAIL fit       a one-line system message and a one-word message (no baseline given) is", "a slot holds 4096: every turn would overflow; see docs/runbook.md#selftest-fit"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSelftestJSON(t *testing.T) {
	srv := scripted(t, fake.Options{})
	code, out, _ := run("selftest", "--llama", srv.URL(), "--json", "--max-tokens", "2048")
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name string
			OK   bool
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != ExitOK || !rep.OK || len(rep.Checks) != 6 {
		t.Errorf("selftest --json = %d, %v, %+v\n%s", code, err, rep, out)
	}
}
