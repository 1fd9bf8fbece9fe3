package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUpWithoutLlamaSaysHow(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing answers there now
	state := filepath.Join(t.TempDir(), "state")
	code, _, stderr := run("up", "--state", state, "--llama", addr)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != ExitFailed || len(lines) != 1 || !strings.Contains(stderr, "no llama-server answers at "+addr) || !strings.Contains(stderr, "llama-server -m MODEL.gguf") {
		t.Errorf("up without a server = %d, %q; want exit 1 and one line with the command", code, stderr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Error("up created the state directory although it could not start anything")
	}
}

func TestLayoutWritesConfigsOnce(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	if err := layout(t.Context(), state, "127.0.0.1:1", "m", ""); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"run/infer", "run/loop"} {
		fi, err := os.Stat(filepath.Join(state, d))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a 0700 directory", d, fi.Mode(), err)
		}
	}
	p := filepath.Join(state, "config", "loopd.toml")
	os.WriteFile(p, []byte("# the owner's\n"), 0o600)
	if err := layout(t.Context(), state, "127.0.0.1:1", "m", ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "# the owner's\n" {
		t.Error("layout rewrote an existing config")
	}
	if b, _ := os.ReadFile(filepath.Join(state, "config", "inferproxy.toml")); !strings.Contains(string(b), `upstream = "127.0.0.1:1"`) {
		t.Errorf("inferproxy.toml = %s", b)
	}
}
