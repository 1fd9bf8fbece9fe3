package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestUpWithoutLlamaSaysHow: with no llama-server, bxctl up exits 1
// with one line naming the command that starts one, and writes nothing.
func TestUpWithoutLlamaSaysHow(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing answers there now
	state := filepath.Join(roletest.Dir(t), "state")
	code, _, stderr := run("up", "--state", state, "--llama", addr)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != ExitFailed || len(lines) != 1 || !strings.Contains(stderr, "no llama-server answers at "+addr) || !strings.Contains(stderr, "llama-server -m MODEL.gguf") {
		t.Errorf("up without a server = %d, %q; want exit 1 and one line with the command", code, stderr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Error("up created the state directory although it could not start anything")
	}
}

// TestUpRefusesALiveStack: a role socket that answers (another stack on
// the state, or one still stopping) stops bxctl up before it starts
// anything, with the runbook pointer: its readiness check would otherwise
// dial the old role and report this one ready.
func TestUpRefusesALiveStack(t *testing.T) {
	state := filepath.Join(roletest.Dir(t), "state")
	sock := layout.Socket(state, &wire.Memadmin)
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	code, _, stderr := run("up", "--state", state, "--llama", "127.0.0.1:1")
	if code != ExitFailed || !strings.Contains(stderr, sock+" answers: a stack is already running") || !strings.Contains(stderr, "see docs/runbook.md#socket-in-use") {
		t.Errorf("up beside a live socket = %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(state, "config")); !os.IsNotExist(err) {
		t.Error("up wrote the state although another stack answers")
	}
}
