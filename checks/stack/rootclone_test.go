package stack

import (
	"bufio"
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
)

// devRoot is bxctl up's place for a root run that names no state
// directory (cmd/bxctl/internal/up.DevRoot).
const devRoot = "/var/lib/boxmaker-dev"

// TestStackRootCloneInPrivateHome is the README's main job for a
// newcomer who is root with the clone in root's own 0700 home: `make up`
// runs `bin/bxctl up` with no --state and no --bin, so the state goes
// to /var/lib/boxmaker-dev/state and the role binaries, out of the role
// users' reach, run from copies in /var/lib/boxmaker-dev/bin; a chat
// turn is answered. A state directory the owner names inside that home
// is still refused (layout-unreachable). It needs root and a machine
// without /var/lib/boxmaker-dev, which it removes when done.
func TestStackRootCloneInPrivateHome(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the stack")
	}
	if os.Geteuid() != 0 {
		t.Skip("the situation is root's")
	}
	if _, err := os.Lstat(devRoot); err == nil {
		t.Skipf("%s exists: another bxctl up as root may be using it", devRoot)
	}
	t.Cleanup(func() { os.RemoveAll(devRoot) })
	home, err := os.MkdirTemp("", "roothome")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	require.NoError(t, os.Chmod(home, 0o700))
	clone := filepath.Join(home, "boxmaker")
	bin := filepath.Join(clone, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	BuildInto(t, bin, nil, "bxctl", "loopd", "inferproxy", "brokerd", "memoryd")

	srv := fake.New(t, fake.Options{Slots: 2, NCtx: 65536})
	selftestReplies(srv)
	u, _ := url.Parse(srv.URL())

	// The owner's named state inside the private home: refused.
	named := exec.Command(filepath.Join(bin, "bxctl"), "up", "--llama", u.Host, "--state", filepath.Join(clone, ".boxmaker"))
	named.Dir = clone
	out, err := named.CombinedOutput()
	require.Error(t, err, "bxctl up with a state directory in a 0700 home started:\n%s", out)
	require.Contains(t, string(out), "see docs/runbook.md#layout-unreachable")
	require.NoError(t, os.RemoveAll(filepath.Join(clone, ".boxmaker")))

	// make up: bin/bxctl up --llama HOST, from the clone.
	up := exec.Command(filepath.Join(bin, "bxctl"), "up", "--llama", u.Host)
	up.Dir = clone
	var stderr lockedBuffer
	up.Stderr = &stderr
	pipe, _ := up.StdoutPipe()
	require.NoError(t, up.Start())
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	t.Cleanup(func() {
		up.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			up.Process.Kill()
		}
	})
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var said []string
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("bxctl up ended before it was ready:\n%s\n%s", strings.Join(said, "\n"), stderr.String())
			}
			said = append(said, l)
			ready = strings.Contains(l, "bxctl up: ready")
		case <-time.After(ReadyWait):
			t.Fatalf("bxctl up not ready after %v:\n%s\n%s", ReadyWait, strings.Join(said, "\n"), stderr.String())
		}
	}
	require.Contains(t, strings.Join(said, "\n"), "run from copies in "+devRoot+"/bin")
	for _, r := range []string{"loopd", "inferproxy", "brokerd", "memoryd"} {
		fi, err := os.Stat(filepath.Join(devRoot, "bin", r))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), r)
	}
	_, err = os.Stat(filepath.Join(devRoot, "state", "config", "loopd.toml"))
	require.NoError(t, err, "the state directory is not "+devRoot+"/state")

	// bxctl chat, also with no --state, finds the same stack.
	srv.Script(fake.Reply{Reasoning: "Greet.", Content: "Hello from the root clone."})
	chat := exec.Command(filepath.Join(bin, "bxctl"), "chat", "--session", "first", "--message", "hello")
	chat.Dir = clone
	var chatOut bytes.Buffer
	chat.Stdout, chat.Stderr = &chatOut, &chatOut
	require.NoError(t, chat.Run(), chatOut.String())
	require.Contains(t, chatOut.String(), "Hello from the root clone.")
}
