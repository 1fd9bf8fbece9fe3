package contain

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/netns"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// The test binary is also the probe and the listeners, chosen by these.
const (
	probeEnv  = "BOXMAKER_CONTAIN_PROBE"
	listenEnv = "BOXMAKER_CONTAIN_LISTEN" // dir, name and accepted uids, space-separated
)

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		os.Exit(Main())
	}
	if spec := os.Getenv(listenEnv); spec != "" {
		os.Exit(listen(spec))
	}
	// The role users cannot enter go test's 0700 build directory: they
	// run a copy of this binary.
	code := 2
	if dir, err := copySelf(); err != nil {
		fmt.Fprintln(os.Stderr, "contain:", err)
	} else {
		code = m.Run()
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// self is the copy of the test binary the role users run.
var self string

func copySelf() (string, error) {
	dir, err := os.MkdirTemp("", "contain")
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(os.Args[0])
	if err == nil {
		self = filepath.Join(dir, "contain.test")
		err = os.WriteFile(self, b, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	return dir, err
}

// listen serves one socket as package sockets does for every daemon,
// keeping each accepted connection open until its peer goes.
func listen(spec string) int {
	f := strings.Fields(spec)
	var uids []uint32
	for _, s := range f[2:] {
		n, _ := strconv.ParseUint(s, 10, 32)
		uids = append(uids, uint32(n))
	}
	ln, err := sockets.Listen(sockets.Config{Dir: f[0], Name: f[1], AllowUIDs: uids, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	fmt.Println("ready")
	ln.Serve(context.Background(), func(_ context.Context, _ sockets.Peer, c net.Conn) { io.Copy(io.Discard, c) })
	return 0
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the containment test needs root (CI runs as root)")
		}
		t.Skip("the containment test needs root: it runs each role under its own uid")
	}
}

// world is a state directory made as bxctl up makes it, with a sample in
// every directory, a listener on every socket and TCP listeners on the
// host.
type world struct {
	state, lo, host string
	u               layout.Users
	listeners       map[string]*exec.Cmd
}

func newWorld(t *testing.T) *world {
	w := &world{state: filepath.Join(roletest.Dir(t), "state"), u: layout.DefaultUsers(layout.ID{}), listeners: map[string]*exec.Cmd{}}
	must(t, os.Mkdir(w.state, 0o700))
	must(t, os.Mkdir(layout.Config.In(w.state), 0o700))
	must(t, os.WriteFile(layout.UsersFile.In(w.state), []byte(w.u.Text()), 0o644))
	must(t, os.WriteFile(layout.FormatFile.In(w.state), []byte(layout.FormatText(layout.Format)), 0o644))
	for _, r := range layout.Daemons {
		must(t, os.WriteFile(layout.ConfigFile(r).In(w.state), []byte("# "+r+"\n"), 0o600))
	}
	must(t, layout.Make(w.state, w.u)) // the directories
	for _, e := range layout.Table {
		if e.Kind == layout.Dir && e.Files != 0 && e != &layout.Config {
			must(t, os.WriteFile(filepath.Join(e.In(w.state), layout.Sample), []byte("sample\n"), 0o600))
		}
	}
	must(t, layout.Make(w.state, w.u)) // the samples, as the owner's files
	if ps := layout.Verify(w.state, w.u); len(ps) != 0 {
		t.Fatalf("the made state directory fails the table: %v", ps)
	}
	for _, s := range wire.Sockets {
		w.startListener(t, s, layout.AcceptUIDs(w.u, s))
	}
	// Podman's socket: root's service, its file given brokerd's group as
	// bxctl up gives it.
	pl, err := net.Listen("unix", layout.PodmanRun.SocketIn(w.state))
	must(t, err)
	t.Cleanup(func() { pl.Close() })
	uid, gid := layout.PodmanRun.IDs(w.u)
	must(t, os.Lchown(layout.PodmanRun.SocketIn(w.state), int(uid), int(gid)))
	must(t, os.Chmod(layout.PodmanRun.SocketIn(w.state), layout.PodmanRun.FilesFor(w.u)))
	go hold(pl)
	w.lo = tcp(t, "127.0.0.1:0")
	w.host = tcp(t, net.JoinHostPort(hostAddr(t), "0"))
	return w
}

func (w *world) startListener(t *testing.T, s *wire.Socket, accept []uint32) {
	t.Helper()
	if old := w.listeners[s.Name]; old != nil {
		old.Process.Kill()
		old.Wait()
	}
	e := layout.SocketFor(s)
	spec := e.In(w.state) + " " + s.Name
	for _, a := range accept {
		spec += " " + strconv.FormatUint(uint64(a), 10)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), listenEnv+"="+spec)
	id := w.u.Of(e.Owner)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: []uint32{}}, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("listener for %s as %s: %q", s.Name, e.Owner, line)
	}
	w.listeners[s.Name] = cmd
}

// probe runs the probe as role (its uid, gid, no groups, and a network
// namespace of its own for a role without network) and returns what it
// could do, cell by cell.
func (w *world) probe(t *testing.T, role string) ([]layout.Cell, []bool) {
	t.Helper()
	row := layout.Row(w.u, role)
	job, _ := json.Marshal(Job{State: w.state, Cells: row, Loopback: w.lo, Host: w.host})
	id := w.u.Of(role)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), probeEnv+"=1")
	attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: []uint32{}}, Pdeathsig: syscall.SIGKILL}
	noNet := slices.Contains(layout.NoNetwork, role)
	if noNet {
		attr.Cloneflags = syscall.CLONE_NEWNET
	}
	cmd.SysProcAttr = attr
	in, err := cmd.StdinPipe()
	must(t, err)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	must(t, cmd.Start())
	if noNet { // as bxctl up does for loopd, before the probe reads its job
		must(t, netns.LoopbackUp(cmd.Process.Pid))
	}
	in.Write(job)
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("probe as %s: %v\n%s", role, err, errb.String())
	}
	var got []bool
	must(t, json.Unmarshal(out.Bytes(), &got))
	return row, got
}

// diff is every cell where what happened differs from the table.
func diff(row []layout.Cell, got []bool) []string {
	var d []string
	for i, c := range row {
		if got[i] != c.Reach {
			d = append(d, fmt.Sprintf("%s %s: table %v, probe %v", c.Op, c.Path, c.Reach, got[i]))
		}
	}
	return d
}

// TestContainment: every role's probe equals its row of the table, cell
// for cell.
func TestContainment(t *testing.T) {
	needRoot(t)
	w := newWorld(t)
	cells := 0
	for _, r := range layout.Daemons {
		row, got := w.probe(t, r)
		cells += len(row)
		for _, d := range diff(row, got) {
			t.Errorf("%s: %s", r, d)
		}
	}
	t.Logf("%d cells over %d roles", cells, len(layout.Daemons))
}

// TestContainmentCatchesLoosening: one directory mode, one group and one
// accepted uid loosened, each caught by the probe.
func TestContainmentCatchesLoosening(t *testing.T) {
	needRoot(t)
	for _, c := range []struct {
		name, role string
		plant      func(w *world) error
	}{
		{"directory mode", layout.Memoryd, func(w *world) error { return os.Chmod(layout.AdminRun.In(w.state), os.ModeSetgid|0o755) }},
		{"group", layout.Gatewayd, func(w *world) error {
			return os.Chown(layout.Broker.In(w.state), -1, int(w.u.Of(layout.Gatewayd).GID))
		}},
		{"group of a pair", layout.Memoryd, func(w *world) error {
			return os.Chown(layout.BrokerRun.In(w.state), -1, int(w.u.Of(layout.Memoryd).GID))
		}},
		{"accepted uid", layout.Loopd, func(w *world) error {
			w.startListener(t, &wire.Loop, append(layout.AcceptUIDs(w.u, &wire.Loop), w.u.Of(layout.Loopd).UID))
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			if d := diff(w.probe(t, c.role)); len(d) != 0 {
				t.Fatalf("before the loosening: %v", d)
			}
			// A group that a directory of 0700 does not use is still a
			// loosening in the table's terms; make it count.
			must(t, c.plant(w))
			if c.name == "group" {
				must(t, os.Chmod(layout.Broker.In(w.state), 0o750))
			}
			d := diff(w.probe(t, c.role))
			if len(d) == 0 {
				t.Errorf("the probe as %s did not notice the loosened %s", c.role, c.name)
			}
			t.Logf("caught: %v", d)
			if ps := layout.Verify(w.state, w.u); c.name != "accepted uid" && len(ps) == 0 {
				t.Errorf("layout.Verify did not notice the loosened %s", c.name)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func hold(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() { io.Copy(io.Discard, c); c.Close() }()
	}
}

func tcp(t *testing.T, addr string) string {
	ln, err := net.Listen("tcp", addr)
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	go hold(ln)
	return ln.Addr().String()
}

// hostAddr is a non-loopback address of this machine.
func hostAddr(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	must(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address on this machine")
	return ""
}
