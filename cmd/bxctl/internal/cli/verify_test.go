package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
)

func TestVerifyDevice(t *testing.T) {
	const tmpl = "{# keep-thinking #}"
	h := sha256.Sum256([]byte(tmpl))
	dir := t.TempDir()
	base := filepath.Join(dir, "0.baseline.json")
	if err := os.WriteFile(base, []byte(`{"system":"You are Boxmaker.","tools":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(drop bool) *fake.Server {
		srv := fake.New(t, fake.Options{ChatTemplate: tmpl, DropEarlierThinking: drop})
		srv.Script(
			fake.Reply{Reasoning: "Time.", ToolCalls: []fake.ToolCall{{Name: "clock", Arguments: `{}`}}},
			fake.Reply{Reasoning: "Greet.", Content: "Hello."},
			fake.Reply{Reasoning: "Again.", Content: "Hello again."},
			fake.Reply{ThinkTokens: 300, Content: "25.", TokenDelay: time.Millisecond}, // real time, so reasoning_end arrives mid-thought
		)
		return srv
	}
	args := func(url string) []string {
		return []string{"verify-device", "--llama", url, "--model", "fake-model", "--n-ctx", "8192", "--slots", "2",
			"--template-sha256", hex.EncodeToString(h[:]), "--baseline", base, "--max-tokens", "2048"}
	}
	var out, errb bytes.Buffer
	if code := Main(args(start(false).URL()), &out, &errb); code != ExitOK {
		t.Fatalf("exit %d on the keep-thinking template:\n%s%s", code, out.String(), errb.String())
	}
	if !strings.HasPrefix(out.String(), "CHECK") || !strings.Contains(out.String(), "reasoning") {
		t.Errorf("no table:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
	out.Reset()
	if code := Main(args(start(true).URL()), &out, &errb); code != ExitFailed {
		t.Fatalf("exit %d on the stock template, want %d:\n%s", code, ExitFailed, out.String())
	}
	if !strings.Contains(out.String(), "FAIL") {
		t.Errorf("no FAIL row:\n%s", out.String())
	}
	// Every recorded figure is required.
	a := args("http://127.0.0.1:1")
	for i, s := range a {
		if s == "--template-sha256" {
			a = append(a[:i:i], a[i+2:]...)
			break
		}
	}
	errb.Reset()
	if code := Main(a, &out, &errb); code != ExitUsage || !strings.Contains(errb.String(), "docs/runbook.md#verify-usage") {
		t.Errorf("without --template-sha256: exit %d, %s", code, errb.String())
	}
}
