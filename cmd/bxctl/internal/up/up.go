// Package up is `bxctl up`, the supervisor of the local stack: every
// role that exists as a child process of bxctl, from one state directory,
// stopped together.
//
// Invariant: what up makes in a state directory is exactly package
// layout's table (entries marked Up, their modes and, as root, their
// owners) plus a first config per role that has none; a config that
// exists is the owner's and is never rewritten, and a state directory of
// a newer format is left untouched. Nothing starts while another stack
// answers on the same state. As root each role runs as its own user from
// binaries only root can change (copied into DevRoot/bin when bxctl's own
// directory does not qualify), loopd in a network namespace of its own;
// every child dies with bxctl.
package up

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
	"wntrmute.dev/boxmaker/pkg/host/roleconf/first"
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

// Options are `bxctl up`'s flags, the state directory resolved.
type Options struct {
	State     string // the state directory, absolute
	Llama     string // llama-server's host:port
	Model     string // the model for loopd's first config; "" asks the server
	Bin       string // the role binaries' directory; "" is bxctl's own
	ToolImage string // the tool image ID for brokerd's first config, or ""
	Podman    string // the podman binary for the tool containers' service; "" finds it on PATH
	// ReadyTimeout is how long a role may take to start.
	ReadyTimeout time.Duration
	// ServerModel asks the llama-server at a base URL which model it
	// serves, when Model is ""; nil, or its failure, writes "default".
	ServerModel func(ctx context.Context, base string) (string, error)
}

// Run is `bxctl up`: every role that exists, as child processes, from a
// state directory; first run creates the directory, default configs and
// socket directories with the right modes. It prints each role as it
// becomes ready on stdout, and stops them all when ctx ends (returning
// nil) or when any of them stops (an error).
func Run(ctx context.Context, o Options, stdout io.Writer) error {
	state := o.State
	// A role socket that answers is another stack on this state, or one
	// still stopping: its roles would answer for this one's (a role that
	// finds its socket live refuses to start, but the readiness check
	// would dial the old one), so nothing starts until it is gone.
	if s := Live(state); s != "" {
		return fmt.Errorf("%s answers: a stack is already running on %s, or still stopping; stop it (or wait) and run bxctl up again; see docs/runbook.md#socket-in-use", s, state)
	}
	bin := o.Bin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		bin = filepath.Dir(exe)
	}
	if c, err := net.DialTimeout("tcp", o.Llama, 2*time.Second); err != nil {
		_, port, _ := net.SplitHostPort(o.Llama)
		return fmt.Errorf("no llama-server answers at %s; start one with: llama-server -m MODEL.gguf --jinja -np 2 --host 127.0.0.1 --port %s", o.Llama, port)
	} else {
		c.Close()
	}
	if state == filepath.Join(DevRoot, "state") && os.Geteuid() == 0 {
		// The default as root: its parent must let the role users pass.
		if err := rootDir(DevRoot); err != nil {
			return err
		}
	}
	if err := MakeState(ctx, o); err != nil {
		return err
	}
	users, err := layout.LoadUsers(state)
	if err != nil {
		return err
	}
	if users.Single() {
		fmt.Fprintf(stdout, "bxctl up: not root, so every role runs as uid %d with the host's network: roles are kept apart by code and peer checks only, not by users or loopd's network namespace\n", os.Geteuid())
	}
	pr, err := podmanRole(state, o.Podman)
	if err != nil {
		return err
	}
	if bin, err = roleBinaries(bin, o.Bin != "", []string{"inferproxy", "memoryd", "brokerd", "loopd", "gatewayd"}, DevRoot, stdout); err != nil {
		return err
	}
	roles := []*role{}
	for i, name := range []string{"inferproxy", "memoryd", "brokerd", "loopd"} {
		roles = append(roles, &role{name: name, socket: layout.Socket(state, upSockets[i])})
	}
	if pr != nil {
		roles = append([]*role{pr}, roles...)
	}
	if gw, err := gatewayRole(state); err != nil {
		return err
	} else if gw != nil {
		roles = append(roles, gw)
	}
	defer stopAll(roles)
	for _, r := range roles {
		if err := start(r, bin, state, users); err != nil {
			return err
		}
		if err := waitReady(ctx, r, o.ReadyTimeout); err != nil {
			// The role's last log lines follow, one per line.
			return errors.New(strings.TrimSuffix(fmt.Sprintf("%s did not start: %v\n%s", r.name, err, tail(r.log, 8)), "\n"))
		}
		if r.name == "podman" {
			if err := podmanReady(state, users); err != nil {
				return err
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
		return nil
	case name := <-cases:
		return fmt.Errorf("%s stopped; stopping the rest", name)
	}
}

// Live returns the first of the sockets by which bxctl up knows its
// roles that answers on state (a stack runs there, or is still
// stopping), or "" if none does.
func Live(state string) string {
	for _, s := range upSockets {
		if c, err := net.DialTimeout("unix", layout.Socket(state, s), time.Second); err == nil {
			c.Close()
			return layout.Socket(state, s)
		}
	}
	return ""
}

// MakeState creates the state directory o.State on first run (every
// entry of package layout's table that bxctl up makes) and writes a
// default config for each role that has none, from o's Llama, Model and
// ToolImage. Existing configs are the owner's and are never rewritten.
func MakeState(ctx context.Context, o Options) error {
	state, model := o.State, o.Model
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
		model = "default"
		if o.ServerModel != nil {
			if m, err := o.ServerModel(ctx, "http://"+o.Llama); err == nil {
				model = m
			}
		}
	}
	users, err := layout.LoadUsers(state)
	if err != nil {
		return err
	}
	p := first.Params{State: state, Llama: o.Llama, Model: model, ToolImage: o.ToolImage}
	if !users.Single() {
		owner := users.Of(layout.Owner).UID
		p.OwnerUID = &owner
	}
	for _, c := range first.Configs {
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
