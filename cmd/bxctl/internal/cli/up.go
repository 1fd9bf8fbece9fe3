package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// role is one daemon `bxctl up` runs.
type role struct {
	name   string
	socket string   // the socket that appears when it is ready
	argv   []string // the command, if not the role binary with -config
	cmd    *exec.Cmd
	log    string
	done   chan error
}

// runUp is `bxctl up`: every role that exists, as child processes, from a
// state directory; first run creates the directory, default configs and
// socket directories with the right modes. It stops them all on Ctrl-C,
// or when any of them stops.
func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("up", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker, or "+DevRoot+"/state as root)")
	llamaAddr := fs.String("llama", "127.0.0.1:8080", "llama-server's `host:port`")
	model := fs.String("model", "", "model `name` for loopd's first config (default: what the server reports)")
	binDir := fs.String("bin", "", "`directory` holding the role binaries (default: bxctl's own)")
	toolImage := fs.String("tool-image", "", "tool image `ID` (sha256:...) for brokerd's first config; with it, bxctl runs a Podman service for the tool containers")
	podman := fs.String("podman", "", "podman `binary` for that service (default: podman on PATH)")
	readyWait := fs.Duration("ready-timeout", 5*time.Minute, "how long a role may take to start (loopd runs its self-test first)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl up: %v\n", err)
		return ExitUsage
	}
	// A role socket that answers is another stack on this state, or one
	// still stopping: its roles would answer for this one's (a role that
	// finds its socket live refuses to start, but the readiness check
	// would dial the old one), so nothing starts until it is gone.
	for _, s := range upSockets {
		if c, err := net.DialTimeout("unix", layout.Socket(state, s), time.Second); err == nil {
			c.Close()
			fmt.Fprintf(stderr, "bxctl up: %s answers: a stack is already running on %s, or still stopping; stop it (or wait) and run bxctl up again; see docs/runbook.md#socket-in-use\n", layout.Socket(state, s), state)
			return ExitFailed
		}
	}
	bin := *binDir
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "bxctl up: %v\n", err)
			return ExitFailed
		}
		bin = filepath.Dir(exe)
	}
	if c, err := net.DialTimeout("tcp", *llamaAddr, 2*time.Second); err != nil {
		_, port, _ := net.SplitHostPort(*llamaAddr)
		fmt.Fprintf(stderr, "bxctl up: no llama-server answers at %s; start one with: llama-server -m MODEL.gguf --jinja -np 2 --host 127.0.0.1 --port %s\n", *llamaAddr, port)
		return ExitFailed
	} else {
		c.Close()
	}
	if state == filepath.Join(DevRoot, "state") && os.Geteuid() == 0 {
		// The default as root: its parent must let the role users pass.
		if err := rootDir(DevRoot); err != nil {
			fmt.Fprintf(stderr, "bxctl up: %v\n", err)
			return ExitFailed
		}
	}
	if err := makeState(ctx, state, *llamaAddr, *model, *toolImage); err != nil {
		fmt.Fprintf(stderr, "bxctl up: %v\n", err)
		return ExitFailed
	}
	users, err := layout.LoadUsers(state)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl up: %v\n", err)
		return ExitFailed
	}
	if users.Single() {
		fmt.Fprintf(stdout, "bxctl up: not root, so every role runs as uid %d with the host's network: roles are kept apart by code and peer checks only, not by users or loopd's network namespace\n", os.Geteuid())
	}
	pr, err := podmanRole(state, *podman)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl up: %v\n", err)
		return ExitFailed
	}
	if bin, err = roleBinaries(bin, *binDir != "", []string{"inferproxy", "memoryd", "brokerd", "loopd", "gatewayd"}, DevRoot, stdout); err != nil {
		fmt.Fprintf(stderr, "bxctl up: %v\n", err)
		return ExitFailed
	}
	roles := []*role{}
	for i, name := range []string{"inferproxy", "memoryd", "brokerd", "loopd"} {
		roles = append(roles, &role{name: name, socket: layout.Socket(state, upSockets[i])})
	}
	if pr != nil {
		roles = append([]*role{pr}, roles...)
	}
	if gw, err := gatewayRole(state); err != nil {
		fmt.Fprintf(stderr, "bxctl up: %v\n", err)
		return ExitFailed
	} else if gw != nil {
		roles = append(roles, gw)
	}
	defer stopAll(roles)
	for _, r := range roles {
		if err := start(r, bin, state, users); err != nil {
			fmt.Fprintf(stderr, "bxctl up: %v\n", err)
			return ExitFailed
		}
		if err := waitReady(ctx, r, *readyWait); err != nil {
			fmt.Fprintf(stderr, "bxctl up: %s did not start: %v\n%s", r.name, err, tail(r.log, 8))
			return ExitFailed
		}
		if r.name == "podman" {
			if err := podmanReady(state, users); err != nil {
				fmt.Fprintf(stderr, "bxctl up: %v\n", err)
				return ExitFailed
			}
		}
		fmt.Fprintf(stdout, "bxctl up: %s ready (%s)\n", r.name, r.socket)
	}
	fmt.Fprintf(stdout, "bxctl up: ready; chat with: bxctl chat --state %s\n", state)
	cases := make(chan string, len(roles))
	for _, r := range roles {
		go func() { <-r.done; cases <- r.name }()
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "bxctl up: stopping")
		return ExitOK
	case name := <-cases:
		fmt.Fprintf(stderr, "bxctl up: %s stopped; stopping the rest\n", name)
		return ExitFailed
	}
}

// makeState creates the state directory on first run (every entry of
// package layout's table that bxctl up makes) and writes a default config
// for each role that has none. Existing configs are the owner's and are
// never rewritten.
func makeState(ctx context.Context, state, llamaAddr, model, toolImage string) error {
	// A state directory of a newer format is left exactly as it is (the
	// daemons would refuse it too); a new one records this build's.
	fresh, err := layout.Fresh(state)
	if err != nil {
		return err
	}
	if _, err := layout.CheckFormat(state, "bxctl"); err != nil {
		return err
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(layout.Config.In(state), 0o700); err != nil {
		return err
	}
	// As root, each role its own user: users.toml with the default ids
	// unless the owner wrote one.
	if os.Geteuid() == 0 {
		def := layout.DefaultUsers(layout.ID{UID: 0, GID: 0})
		if err := writeNew(layout.UsersFile.In(state), def.Text(), 0o644); err != nil {
			return err
		}
	}
	if model == "" {
		var err error
		if model, err = discoverModel(ctx, "http://"+llamaAddr); err != nil {
			model = "default"
		}
	}
	users, err := layout.LoadUsers(state)
	if err != nil {
		return err
	}
	p := layout.Params{State: state, Llama: llamaAddr, Model: model, ToolImage: toolImage}
	if !users.Single() {
		owner := users.Of(layout.Owner).UID
		p.OwnerUID = &owner
	}
	for _, c := range layout.FirstConfigs {
		if err := writeNew(c.Path(state), c.Text(p), 0o600); err != nil {
			return err
		}
	}
	if err := layout.Make(state, users); err != nil {
		return err
	}
	if fresh {
		if err := layout.WriteFormat(state, layout.Format); err != nil {
			return err
		}
	}
	return layout.Enterable(state, users)
}

// writeNew writes a file that does not exist yet; an existing one is the
// owner's and is left alone.
func writeNew(path, text string, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, werr := f.WriteString(text)
	return errors.Join(werr, f.Close())
}

func start(r *role, bin, state string, users layout.Users) error {
	r.log = filepath.Join(layout.Logs.In(state), r.name+".log")
	lf, err := layout.OpenLog(state, r.name, users)
	if err != nil {
		return err
	}
	r.cmd = exec.Command(filepath.Join(bin, r.name), "-config", layout.ConfigPath(state, r.name), "-state", state)
	if r.argv != nil {
		r.cmd = exec.Command(r.argv[0], r.argv[1:]...)
	}
	r.cmd.Stdout, r.cmd.Stderr = lf, lf
	// A child must not outlive bxctl, even if bxctl is killed outright.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	isolate(r.cmd.SysProcAttr, r.name, users, hasRunner(state))
	if err := r.cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("start %s: %w", r.name, err)
	}
	if err := afterStart(r.cmd, r.name, users); err != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		lf.Close()
		return fmt.Errorf("start %s: %w", r.name, err)
	}
	r.done = make(chan error, 1)
	go func() { r.done <- r.cmd.Wait(); lf.Close(); close(r.done) }()
	return nil
}

// upSockets are the sockets by which bxctl up knows its roles are ready,
// in the order it starts them: inferproxy, memoryd, brokerd, loopd.
var upSockets = []*wire.Socket{&wire.Infer, &wire.Memadmin, &wire.Admin, &wire.Loop}

// waitReady waits for the role's socket to answer, or for it to exit.
func waitReady(ctx context.Context, r *role, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if c, err := net.Dial("unix", r.socket); err == nil {
			c.Close()
			// The socket answered: it is this role's only if the role
			// still runs (one that found it taken has exited).
			select {
			case err := <-r.done:
				return fmt.Errorf("it exited (%v) while something else answered on %s", err, r.socket)
			default:
				return nil
			}
		}
		select {
		case err := <-r.done:
			return fmt.Errorf("it exited (%v)", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its socket did not answer within %v", limit)
		}
	}
}

// stopAll sends SIGTERM to every running role, last started first, and
// waits; a role still running after 10 s is killed.
func stopAll(roles []*role) {
	for i := len(roles) - 1; i >= 0; i-- {
		r := roles[i]
		if r.cmd == nil || r.cmd.Process == nil {
			continue
		}
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			r.cmd.Process.Kill()
			<-r.done
		}
	}
}

// tail returns the last n lines of a log, indented, for a failure report.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, "  "+sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}
