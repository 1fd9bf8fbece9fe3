package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestBinary runs the real binary: a bad config, one naming another
// socket directory than the layout table's, and one outside any state
// directory each refuse to start with exit code 2 and one line saying
// why; one an older bxctl up wrote (the table's own directory) serves,
// with a warning to delete the key, until SIGTERM and exits 0, removing
// its socket.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "inferproxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	state := roletest.State(t, nil)
	cfg := layout.ConfigPath(state, "inferproxy")
	sock := layout.Socket(state, &wire.Infer)
	// Each refused config exits 2 with one line saying why.
	outside := filepath.Join(dir, "inferproxy.toml")
	os.WriteFile(outside, []byte("upstream = \"127.0.0.1:8080\"\n"), 0o600)
	for _, c := range []struct{ path, text, want string }{
		{cfg, "upstream = \"127.0.0.1:8080\"\nUpstream_typo = 1\n", "unknown key Upstream_typo"},
		{cfg, "socket_dir = \"/run/boxmaker/infer\"\nupstream = \"127.0.0.1:8080\"\n",
			`key socket_dir is no longer read: the layout table gives \"` + layout.InferRun.In(state) + `\"`},
		{outside, "", "see docs/runbook.md#state-dir-missing"},
	} {
		if c.text != "" {
			os.WriteFile(c.path, []byte(c.text), 0o600)
		}
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "-config", c.path)
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Fatalf("%q: %v, stderr %s; want exit 2 and %s", c.text, err, stderr.String(), c.want)
		}
	}
	// A config an older bxctl up wrote names the table's own directory:
	// it serves, with a warning to delete the key.
	os.WriteFile(cfg, []byte("socket_dir = \""+layout.InferRun.In(state)+"\"\nupstream = \"127.0.0.1:8080\"\n"), 0o600)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i > 1000 {
			cmd.Process.Kill()
			t.Fatalf("infer.sock never appeared; stderr: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v, stderr %s; want exit 0", err, stderr.String())
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left after stop: %v", err)
	}
	for _, want := range []string{`"msg":"starting"`, `"msg":"serving"`, `"msg":"stopped"`, `"level":"WARN","msg":"config ` + cfg + `: key socket_dir is no longer read`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, stderr.String())
		}
	}
}
