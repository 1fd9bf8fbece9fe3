// Package stack builds the role binaries and runs `bxctl up` for the
// whole-stack tests of several roles, so that each runs the stack the way
// the owner does.
//
// Invariant: a stack started here is stopped (SIGTERM, then waited for)
// when its test ends, and every binary is built with its role's own build
// tags (cmd/<role>/tags.txt), as `make build` builds it.
package stack

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/checks/roletest"
)

// ReadyWait bounds how long `bxctl up` may take to say it is ready.
const ReadyWait = 2 * time.Minute

// root is the module's directory, found from this file's own path.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Build builds the named roles (static, with their tags) into a new
// directory and returns it.
func Build(t *testing.T, roles ...string) string {
	t.Helper()
	bin := roletest.Readable(t)
	BuildInto(t, bin, nil, roles...)
	return bin
}

// TestHooks is the build tag of the test-only debug knobs (loopd's
// BOXMAKER_TEST_EPOCH_KILL_AT): no release build sets it.
const TestHooks = "boxmaker_testhooks"

// BuildInto builds the named roles into bin with their tags and extra.
func BuildInto(t *testing.T, bin string, extra []string, roles ...string) {
	t.Helper()
	for _, role := range roles {
		args := []string{"build", "-o", filepath.Join(bin, role)}
		tags := extra
		if b, err := os.ReadFile(filepath.Join(root(), "cmd", role, "tags.txt")); err == nil {
			tags = append(strings.Fields(string(b)), extra...)
		}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		cmd := exec.Command("go", append(args, "wntrmute.dev/boxmaker/cmd/"+role)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", role, err, out)
		}
	}
}

// Up runs `bxctl up --state state --llama llamaHost --bin bin` with extra
// flags and env added to the environment, waits until it says it is
// ready, and stops it when the test ends; a stack that does not stop
// cleanly then fails the test. The channel reports its exit if it stops
// on its own first.
func Up(t *testing.T, bin, state, llamaHost string, env []string, extra ...string) <-chan error {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "bxctl"), append([]string{"up", "--state", state, "--llama", llamaHost, "--bin", bin}, extra...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr lockedBuffer // read while exec's copier may still write
	cmd.Stderr = &stderr
	out, _ := cmd.StdoutPipe()
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	waited := make(chan struct{})
	go func() { exited <- cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		select {
		case <-waited:
			return // it stopped on its own; the test saw why
		default:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Errorf("bxctl up after SIGTERM: %v\n%s", err, stderr.String())
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "bxctl up: ready") {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("bxctl up ended before it was ready:\n%s", stderr.String())
		}
	case <-time.After(ReadyWait):
		t.Fatalf("bxctl up not ready after %v:\n%s", ReadyWait, stderr.String())
	}
	return exited
}

// lockedBuffer is a bytes.Buffer safe to read while another goroutine
// writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ShortState is a state directory (not yet made) under a temp root of
// its own with a short path, since a Unix socket path holds at most 107
// bytes; the root is passable by the role users (as root, bxctl up runs
// each role as its own user) and removed when the test ends.
func ShortState(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "bx")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	require.NoError(t, os.Chmod(root, 0o711))
	return filepath.Join(root, "s")
}
