// Package stack builds the role binaries and runs `bxctl up` for the
// whole-stack tests of several roles, so that each runs the stack the way
// the owner does.
//
// Invariant: a stack started here is stopped (SIGTERM, then waited for)
// when its test ends, and every binary is built with its role's own build
// tags (cmd/<role>/tags.txt), as `make build` builds it. Under [Main]
// each role is built once per test binary and every test gets its own
// directory of links to that build, so tests that run in parallel share
// the binaries' bytes and nothing else.
package stack

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/checks/roletest"
)

// ReadyWait bounds how long `bxctl up` may take to say it is ready.
const ReadyWait = 2 * time.Minute

// StopWait bounds how long `bxctl up` may take to stop after SIGTERM at
// a test's end; past it the stack is killed and the test fails, rather
// than the whole package hanging until go test's timeout.
const StopWait = 2 * time.Minute

// root is the module's directory, found from this file's own path.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Build gives the test a new directory holding the named roles (static,
// with their tags) and returns it. Under [Main] each role is built once
// per test binary and the directory holds hard links to that build; each
// test still has a directory of its own, so what one test replaces in it
// ([BuildInto]) and the processes it finds by path (bin/loopd) are its own.
func Build(t *testing.T, roles ...string) string {
	t.Helper()
	bin := roletest.Readable(t)
	BuildInto(t, bin, nil, roles...)
	return bin
}

// TestHooks is the build tag of the test-only debug knobs (loopd's
// BOXMAKER_TEST_EPOCH_KILL_AT): no release build sets it.
const TestHooks = "boxmaker_testhooks"

// BuildInto puts the named roles, built with their tags and extra, into
// bin, replacing any file there of the same name.
func BuildInto(t *testing.T, bin string, extra []string, roles ...string) {
	t.Helper()
	if err := builds.into(bin, extra, roles); err != nil {
		t.Fatal(err)
	}
}

// Main is a test binary's TestMain body, as podmantest.Main (which it
// calls): it makes the directory the roles are built into once and
// removes it when the tests end. Use it as `os.Exit(stack.Main(m))`.
// Without it [Build] builds every role anew for each test.
//
// It also runs up to two parallel tests per core (GOMAXPROCS) at a time
// unless -parallel is given (go test's default is one per core): a stack
// test mostly waits (on a stalled model, an idle period, a restart), so
// more of them than there are cores finish sooner (measured on a 2-core
// machine under a load of 28: the package took 113 s with 2 at a time,
// 85 s with 4).
func Main(m *testing.M) int {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0)))
	}
	dir, err := os.MkdirTemp("", "boxmaker-stack-bin-")
	if err == nil {
		err = os.Chmod(dir, 0o755) // the role users run what is linked from here
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		return 1
	}
	builds.start(dir)
	defer os.RemoveAll(dir)
	return podmantest.Main(m)
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
	// A role that outlived bxctl up would hold the stderr pipe open and
	// Wait with it; past this, Wait closes the pipe and returns.
	cmd.WaitDelay = 10 * time.Second
	out, _ := cmd.StdoutPipe()
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	waited := make(chan struct{})
	// waited closes before exited is sent: a test that took the exit from
	// exited and then ended finds waited closed in the cleanup below
	// (in the other order, a cleanup racing the close under load sent
	// SIGTERM to a reaped process and waited on exited for ever).
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(waited); exited <- waitErr }()
	pid := cmd.Process.Pid
	running.Store(pid, (<-chan struct{})(waited))
	t.Cleanup(func() { running.Delete(pid) })
	t.Cleanup(func() {
		select {
		case <-waited:
			return // it stopped on its own; the test saw why
		default:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-waited:
			if waitErr != nil {
				t.Errorf("bxctl up after SIGTERM: %v\n%s", waitErr, stderr.String())
			}
		case <-time.After(StopWait):
			cmd.Process.Kill()
			<-waited
			t.Errorf("bxctl up did not stop within %v of SIGTERM (killed):\n%s", StopWait, stderr.String())
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

// running maps the pid of each `bxctl up` that [Up] started and that
// its test still owns to a channel closed once it has exited and been
// reaped, so that a test stopping a stack waits on the exit itself.
var running sync.Map

// exitOf is the channel [Up] closes when bxctl up with this pid has
// exited; false if [Up] did not start it (or its test has ended).
func exitOf(pid int) (<-chan struct{}, bool) {
	ch, ok := running.Load(pid)
	if !ok {
		return nil, false
	}
	return ch.(<-chan struct{}), true
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
