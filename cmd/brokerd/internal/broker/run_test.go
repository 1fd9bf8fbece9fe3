package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func TestResultText(t *testing.T) {
	for _, tt := range []struct {
		out  runner.Output
		want string
	}{
		{runner.Output{Stdout: "a\n"}, "a\n"},
		{runner.Output{Stdout: "a", Stderr: "e\n", Exit: 1}, "a\n[stderr]\ne\n"},
		{runner.Output{Stderr: "e"}, "[stderr]\ne"},
		{runner.Output{Stdout: "x", Stopped: runner.StopOutput}, "x\n[brokerd stopped the tool: " + runner.StopOutput + "; see docs/runbook.md#tool-stopped]"},
	} {
		if got := resultText(tt.out); got != tt.want {
			t.Errorf("resultText(%+v) = %q, want %q", tt.out, got, tt.want)
		}
	}
}

// TestSecretFromTheStore: a shell grant's secret is loaded from brokerd's
// store by the name [secrets] maps and reaches only the command's file;
// a name with no entry fails the call before any container exists.
func TestSecretFromTheStore(t *testing.T) {
	svc := podmantest.Require(t)
	image := svc.ToolImage(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	t.Setenv("BX_TEST_TOKEN", "from-the-store-5e1f")
	grants := fmt.Sprintf("[[grant]]\nid = \"gh\"\ntool = \"shell\"\npaths = [%q]\nsecret = \"GH_TOKEN\"\nmax_taint = \"secret\"\nmode = \"auto\"\n", dir+"/gh") +
		fmt.Sprintf("[[grant]]\nid = \"other\"\ntool = \"shell\"\npaths = [%q]\nsecret = \"UNMAPPED\"\nmax_taint = \"secret\"\nmode = \"auto\"\n", dir+"/other")
	os.Mkdir(filepath.Join(dir, "gh"), 0o755)
	os.Mkdir(filepath.Join(dir, "other"), 0o755)
	h := startWith(t, grants, func(c *brokerd.Config) {
		r, _ := brokerd.Runner{PodmanSocket: svc.Socket, ToolImage: image}.Check()
		c.Runner = &r
		ref, _ := secret.ParseRef("env:BX_TEST_TOKEN")
		c.Secrets = map[string]secret.Ref{"GH_TOKEN": ref}
	})
	r := result(t, h.call(t, "shell", fmt.Sprintf(`{"command":"cat \"$BOXMAKER_SECRET_FILE\"; env | grep -c from-the-store","workdir":%q}`, dir+"/gh")))
	if r.Status != wire.StatusFailed || !strings.HasPrefix(r.Output, "[secret GH_TOKEN]0\n") {
		// grep -c prints 0 and exits 1: the value is in no variable; the
		// value the command printed is redacted before it leaves the runner.
		t.Errorf("shell with GH_TOKEN = %+v", r)
	}
	r = result(t, h.call(t, "shell", fmt.Sprintf(`{"command":"true","workdir":%q}`, dir+"/other")))
	if r.Status != wire.StatusFailed || !strings.HasSuffix(r.Output, "see docs/runbook.md#tool-secret-missing") {
		t.Errorf("shell with an unmapped secret = %+v", r)
	}
}

// TestStopSettlesRemovals: the runner removes a call's container after
// the answer, and brokerd's stop waits for that removal, so a stop right
// after an answer leaves no container (listed at once, without waiting).
func TestStopSettlesRemovals(t *testing.T) {
	svc := podmantest.Require(t)
	image := svc.ToolImage(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("hello\n"), 0o644)
	h := startWith(t, fmt.Sprintf("[[grant]]\nid = \"r\"\ntool = \"read_file\"\npaths = [%q]\nmax_taint = \"secret\"\nmode = \"auto\"\n", dir),
		func(c *brokerd.Config) { c.Runner = &brokerd.Runner{PodmanSocket: svc.Socket, ToolImage: image} })
	if r := result(t, h.call(t, "read_file", fmt.Sprintf(`{"path":%q}`, dir+"/f.txt"))); r.Status != wire.StatusRan || r.Output != "hello\n" {
		t.Fatalf("read_file = %+v", r)
	}
	h.stop()
	out, err := svc.CLI(nil, "ps", "-a", "-q", "--filter", "label="+runner.LabelInstance+"="+runner.Instance(h.cfg.StateDir))
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("after brokerd stopped: containers %q left behind (%v)", out, err)
	}
}
