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
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestBinary runs the real binary: a bad config refuses to start with exit
// code 2, a good one serves until SIGTERM and exits 0, removing its socket.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "inferproxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sockDir := filepath.Join(dir, "infer")
	os.Mkdir(sockDir, 0o700)
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("socket_dir = \""+sockDir+"\"\nupstream = \"127.0.0.1:8080\"\nUpstream_typo = 1\n"), 0o600)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-config", bad)
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "unknown key Upstream_typo") {
		t.Fatalf("bad config: %v, stderr %s; want exit 2 naming the key", err, stderr.String())
	}
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("socket_dir = \""+sockDir+"\"\nupstream = \"127.0.0.1:8080\"\n"), 0o600)
	stderr.Reset()
	cmd = exec.Command(bin, "-config", good)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, wire.Infer.Name)
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
	for _, want := range []string{`"msg":"starting"`, `"msg":"serving"`, `"msg":"stopped"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, stderr.String())
		}
	}
}
