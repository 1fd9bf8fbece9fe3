// Package podmantest starts a real Podman API service for tests: the
// Podman that checks/podman-setup built at the version go.mod pins for
// the bindings, with the containers.conf it wrote, on a socket in a
// temporary directory, with its own storage there too, and stops it when
// the tests end. With $BOXMAKER_PODMAN_SOCKET set it uses that running
// service instead (a rootless user's own socket, as in the VM test host),
// and never stops it.
//
// Invariant: a test that needs Podman never passes without it. [Require]
// starts (or reaches) the service once per test binary and fails the test
// when CI is set and the service could not be started, and elsewhere
// skips it with one line saying why; [Main] stops a service it started
// when the tests end. [Service.Rootless] is what the service itself
// reports, never assumed.
package podmantest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Service is one running `podman system service`.
type Service struct {
	Socket  string // the API socket's path
	Binary  string // the podman binary
	dir     string // everything it owns: storage, run root, HOME, socket
	env     []string
	globals []string  // --root and friends, for CLI calls
	cmd     *exec.Cmd // nil for a service this package did not start
	done    chan struct{}
	log     *bytes.Buffer
	// Rootless is whether the service runs rootless, as its own info
	// reports: a rootless service maps a container's ids into one user's
	// subordinate range, which decides the runner's user namespace mode.
	Rootless bool
}

var (
	once   sync.Once
	inMain bool
	shared *Service
	reason error // why shared is nil
)

// Main is a test binary's TestMain body: it runs the tests and stops the
// service if one was started ([Require] starts it on first use). Use it
// as `os.Exit(podmantest.Main(m))`.
func Main(m *testing.M) int {
	inMain = true
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "podmantest:", err)
		}
	}
	return code
}

// Require returns the test binary's service, starting it on first use,
// or ends the test: a failure when CI is set, else a skip with one line
// saying why.
func Require(t testing.TB) *Service {
	t.Helper()
	if !inMain {
		t.Fatal("podmantest.Require needs the package's TestMain to call podmantest.Main (which stops the service)")
	}
	once.Do(func() {
		if sock := os.Getenv(SocketEnv); sock != "" {
			shared, reason = External(sock)
			return
		}
		shared, reason = Start(Options{})
	})
	if shared != nil {
		return shared
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("Podman is required when CI is set: %v", reason)
	}
	t.Skipf("no Podman: %v", reason)
	return nil
}

// Options adjust a service.
type Options struct {
	// Attr runs the service as another user (the rootless test); nil
	// runs it as this process's user.
	Attr *syscall.SysProcAttr
	// Dir is a directory that user can write; "" makes a temporary one.
	Dir string
	// Env is added to the service's environment (XDG_RUNTIME_DIR ...).
	Env []string
}

// Start starts a service. Its error says why Podman cannot run here.
func Start(o Options) (*Service, error) {
	bin, conf, err := Find()
	if err != nil {
		return nil, err
	}
	if o.Attr == nil && os.Geteuid() == 0 {
		// brokerd gives each container of a rootful service a user
		// namespace of its own (userns=auto).
		for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
			if b, _ := os.ReadFile(f); !regexp.MustCompile(`(?m)^containers:`).Match(b) {
				return nil, fmt.Errorf("%s has no subordinate ids for user containers; run checks/setup (as root it adds them)", f)
			}
		}
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "podmantest-"); err != nil {
			return nil, err
		}
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".config", "containers"), 0o700); err != nil {
		return nil, err
	}
	// Nothing may be pulled: the policy refuses every transport but the
	// local archives an image is imported from.
	policy := `{"default":[{"type":"reject"}],"transports":{"docker-archive":{"":[{"type":"insecureAcceptAnything"}]},` +
		`"oci-archive":{"":[{"type":"insecureAcceptAnything"}]},"tarball":{"":[{"type":"insecureAcceptAnything"}]}}}`
	if err := os.WriteFile(filepath.Join(home, ".config", "containers", "policy.json"), []byte(policy), 0o600); err != nil {
		return nil, err
	}
	if o.Attr != nil && o.Attr.Credential != nil {
		// Another user cannot reach this user's cache: give it copies,
		// and everything under dir.
		if bin, conf, err = copyFor(dir, bin, conf, int(o.Attr.Credential.Uid), int(o.Attr.Credential.Gid)); err != nil {
			return nil, err
		}
	}
	s := &Service{Socket: filepath.Join(dir, "podman.sock"), Binary: bin, dir: dir, done: make(chan struct{}), log: new(bytes.Buffer)}
	s.env = []string{"HOME=" + home, "CONTAINERS_CONF=" + conf, "PODMAN_IGNORE_CGROUPSV1_WARNING=1",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if o.Attr == nil && os.Geteuid() != 0 {
		// Rootless as this user: its runtime directory and session bus
		// (the systemd cgroup manager's way to its user manager).
		for _, k := range []string{"XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"} {
			if v, ok := os.LookupEnv(k); ok {
				s.env = append(s.env, k+"="+v)
			}
		}
	}
	s.env = append(s.env, o.Env...)
	s.globals = []string{"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"), "--tmpdir", filepath.Join(dir, "tmp")}
	if o.Attr != nil {
		// Rootless keeps its storage where the user's config says.
		s.globals = nil
	}
	args := append(append([]string{}, s.globals...), "system", "service", "--time=0", "unix://"+s.Socket)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = s.env
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	attr := o.Attr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Pdeathsig = syscall.SIGTERM // never outlive the tests
	s.cmd.SysProcAttr = attr
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %v", bin, err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	if err := s.waitReady(30 * time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	if s.Rootless, err = s.rootless(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Service) waitReady(limit time.Duration) error {
	client := s.HTTP()
	deadline := time.Now().Add(limit)
	for {
		resp, err := client.Get("http://d/_ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("podman system service exited: %s", strings.TrimSpace(s.log.String()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("podman system service did not answer on %s within %v: %s", s.Socket, limit, s.log.String())
		}
	}
}

// HTTP is a client that reaches the API over its socket.
func (s *Service) HTTP() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", s.Socket)
		}}}
}

// URL is the socket as the bindings name it.
func (s *Service) URL() string { return "unix://" + s.Socket }

// Stop stops the service and removes its directory. A service this
// package did not start ([External]) keeps running; only the directory
// its tool image tars were written to goes.
func (s *Service) Stop() error {
	if s.cmd == nil {
		return os.RemoveAll(s.dir)
	}
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	}
	if s.globals == nil {
		// Rootless Podman leaves a pause process holding its user
		// namespace; it would outlive the tests. The caller owns dir.
		return killPause(s.dir)
	}
	if os.Geteuid() != 0 {
		// A rootless service's own storage holds files of its
		// subordinate ids, which only its user namespace may delete.
		rm := exec.Command(s.Binary, append(append([]string{}, s.globals...), "unshare", "rm", "-rf", s.dir)...)
		rm.Env = s.env
		rm.Run()
		return os.RemoveAll(s.dir)
	}
	// Storage may still hold mounts (overlay's private bind of its
	// home); detach them, then delete everything.
	if err := unmountUnder(s.dir); err != nil {
		return err
	}
	return os.RemoveAll(s.dir)
}

// killPause kills the rootless pause process named by a pause.pid under
// dir, if any.
func killPause(dir string) error {
	var errs []error
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "pause.pid" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			errs = append(errs, fmt.Errorf("%s: bad pid %q", p, b))
			return nil
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			errs = append(errs, fmt.Errorf("kill pause process %d: %v", pid, err))
		}
		return nil
	})
	return errors.Join(errs...)
}

// copyFor copies the binary and containers.conf into dir and hands dir
// and everything in it to uid:gid.
func copyFor(dir, bin, conf string, uid, gid int) (string, string, error) {
	out := [2]string{filepath.Join(dir, "podman"), filepath.Join(dir, "containers.conf")}
	for i, src := range []string{bin, conf} {
		b, err := os.ReadFile(src)
		if err != nil {
			return "", "", err
		}
		if err := os.WriteFile(out[i], b, 0o755); err != nil {
			return "", "", err
		}
	}
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	return out[0], out[1], err
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	var errs []error
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %v", points[i], err))
		}
	}
	return errors.Join(errs...)
}

// CLI runs the podman command line against the service's storage, for
// a test's own setup and checks (never brokerd's: it uses the bindings).
func (s *Service) CLI(stdin []byte, args ...string) (string, error) {
	return s.run(stdin, "podman "+strings.Join(args, " "), append([]string{s.Binary, "--url", s.URL()}, args...)...)
}

// run runs argv in the service's environment with stdin (if any) and
// returns its stdout; an error names the command as what and holds its
// stderr.
func (s *Service) run(stdin []byte, what string, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = s.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %v: %s", what, err, stderr.String())
	}
	return out.String(), nil
}

// Find locates the podman binary and containers.conf that
// checks/podman-setup built and wrote for go.mod's bindings version
// ($BOXMAKER_PODMAN overrides the binary, $BOXMAKER_PODMAN_CONF the
// configuration; with both set no source tree is needed, as in a test
// binary copied into the VM test host).
func Find() (bin, conf string, err error) {
	bin, conf = os.Getenv("BOXMAKER_PODMAN"), os.Getenv("BOXMAKER_PODMAN_CONF")
	if bin != "" && conf != "" {
		for _, p := range []string{bin, conf} {
			if _, err := os.Stat(p); err != nil {
				return "", "", fmt.Errorf("podman: %v", err)
			}
		}
		return bin, conf, nil
	}
	version, err := Version()
	if err != nil {
		return "", "", err
	}
	cache := os.Getenv("BOXMAKER_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", "", err
		}
		cache = filepath.Join(home, ".cache", "boxmaker")
	}
	dir := filepath.Join(cache, "podman-"+version)
	if bin == "" {
		bin = filepath.Join(dir, "bin", "podman")
	}
	if conf == "" {
		conf = filepath.Join(dir, "containers.conf")
	}
	for _, p := range []string{bin, conf} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%s is missing; run checks/setup (it builds podman %s)", p, version)
		}
	}
	return bin, conf, nil
}

var requireRE = regexp.MustCompile(`(?m)^(?:require)?\s*github\.com/containers/podman/v5 (v\S+)`)

// Version is the bindings' version in go.mod, which the podman binary is
// built at.
func Version() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	m := requireRE.FindSubmatch(b)
	if m == nil {
		return "", errors.New("go.mod does not require github.com/containers/podman/v5")
	}
	return string(m[1]), nil
}

// RepoRoot is the module's directory: the nearest directory above the
// working directory (a test's package directory) holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
