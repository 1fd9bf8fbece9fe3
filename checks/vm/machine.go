package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/checks/vm/channel"
)

// Machine is one running guest: a qemu process booted from an [Image]
// with its disk in snapshot mode (every write is discarded when qemu
// exits, so each boot starts from the cached image), and the connection to
// its agent.
type Machine struct {
	dir     string // qemu's socket and the console log
	cmd     *exec.Cmd
	exited  chan struct{} // closed when qemu has exited
	waitErr error         // qemu's exit, valid once exited is closed

	mu   sync.Mutex // serialises requests on conn and snapshots; the protocol has one in flight
	conn net.Conn
	qmp  string // qemu's QMP socket, for [Machine.Save] and [Machine.Restore]

	// Booted is how long qemu took from its start to the agent's first
	// frame (kernel, initramfs, systemd up to multi-user's units).
	Booted time.Duration
	// Ready is how long qemu took to reach the end of systemd's start-up
	// (is-system-running --wait), and State the state it reported there
	// ("running", or "degraded" with failed units); [Start] sets both.
	Ready time.Duration
	State string
}

// Result is what one command did in the guest.
type Result struct {
	Exit           int // -1 if it had none (see Err)
	Stdout, Stderr string
	Err            string // why there is no exit code (timeout, start failure)
}

func (r Result) String() string {
	s := fmt.Sprintf("exit %d", r.Exit)
	if r.Err != "" {
		s += " (" + r.Err + ")"
	}
	return s + "\nstdout: " + r.Stdout + "\nstderr: " + r.Stderr
}

// Boot starts qemu on img under software emulation (TCG: this machine's
// /dev/kvm does not run guests) with 2 CPUs, 2 GiB, no network device
// and no display, and waits until the guest's agent is ready or ctx ends.
// The caller must Close the machine.
func Boot(ctx context.Context, img Image) (*Machine, error) {
	dir, err := os.MkdirTemp("", "boxmaker-vm-")
	if err != nil {
		return nil, fmt.Errorf("boot: %w", err)
	}
	sock := filepath.Join(dir, "agent.sock")
	args := []string{
		// -nodefaults: no default NIC, VGA, CD-ROM, floppy or parallel
		// port; the guest gets exactly the devices below.
		"-nodefaults", "-no-user-config", "-accel", "tcg", "-cpu", "max",
		"-m", "2048", "-smp", "2", "-display", "none", "-nic", "none", "-no-reboot",
		"-serial", "file:" + filepath.Join(dir, "console.log"),
		"-kernel", img.Kernel, "-initrd", img.Initrd,
		"-append", "root=/dev/vda rw console=ttyS0 panic=-1 edd=off systemd.unified_cgroup_hierarchy=1",
		"-drive", "file=" + img.Disk + ",format=raw,if=virtio,snapshot=on",
		"-device", "virtio-rng-pci",
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=agent,path=" + sock + ",server=on,wait=off",
		"-device", "virtserialport,chardev=agent,name=boxmaker.agent",
		// QMP, for savevm and loadvm of the shared guest (snapshot.go).
		"-qmp", "unix:" + filepath.Join(dir, "qmp.sock") + ",server=on,wait=off",
	}
	m := &Machine{dir: dir, exited: make(chan struct{}), qmp: filepath.Join(dir, "qmp.sock")}
	m.cmd = exec.Command("qemu-system-x86_64", args...)
	var qemuErr bytes.Buffer
	m.cmd.Stdout, m.cmd.Stderr = &qemuErr, &qemuErr
	// qemu dies with the test binary even if it is killed before its
	// cleanups run (a test timeout). Pdeathsig follows the thread that
	// started the child, so that thread stays locked until qemu exits.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	start := time.Now()
	go func() {
		runtime.LockOSThread()
		if err := m.cmd.Start(); err != nil {
			started <- err
			close(m.exited)
			return
		}
		started <- nil
		m.waitErr = m.cmd.Wait()
		close(m.exited)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("boot: start qemu-system-x86_64: %w", err)
	}
	fail := func(err error) (*Machine, error) {
		m.Close()
		<-m.exited
		return nil, fmt.Errorf("boot: %w\nqemu: %s\nconsole (last lines):\n%s", err, strings.TrimSpace(qemuErr.String()), m.ConsoleTail(40))
	}
	for {
		m.conn, err = net.Dial("unix", sock)
		if err == nil {
			break
		}
		select {
		case <-m.exited:
			return fail(fmt.Errorf("qemu exited before its agent socket appeared: %v", m.waitErr))
		case <-ctx.Done():
			return fail(fmt.Errorf("qemu's agent socket: %w", ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The agent's first frame says it has opened its port. A deadline
	// bounds the wait; qemu exiting closes the socket and ends it too.
	if dl, ok := ctx.Deadline(); ok {
		m.conn.SetReadDeadline(dl)
	}
	var hello channel.Response
	if err := channel.Receive(m.conn, &hello); err != nil {
		return fail(fmt.Errorf("wait for the guest's agent: %w", err))
	}
	if !hello.Ready {
		return fail(errors.New("the guest's agent sent an answer before its ready frame"))
	}
	m.Booted = time.Since(start)
	return m, nil
}

// Run runs argv in the guest as root, with stdin, and returns what it did.
// ctx's deadline (default 2 minutes) is also the guest's timeout for the
// command, whose whole process group is killed there when it passes. An
// error means the channel failed, not the command: a command's own failure
// is in [Result.Exit] and [Result.Err].
func (m *Machine) Run(ctx context.Context, stdin []byte, argv ...string) (Result, error) {
	timeout := 2 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return Result{}, fmt.Errorf("run %s: %w", argv[0], context.DeadlineExceeded)
	}
	resp, err := m.exchange(&channel.Request{Op: "run", Argv: argv, Stdin: stdin, TimeoutMS: timeout.Milliseconds()}, timeout)
	if err != nil {
		return Result{}, fmt.Errorf("run %s: %w", argv[0], err)
	}
	r := Result{Exit: resp.Exit, Stdout: string(resp.Stdout), Stderr: string(resp.Stderr), Err: resp.Error}
	if resp.Truncated {
		r.Err = strings.TrimSpace(r.Err + " output cut at the agent's cap")
	}
	return r, nil
}

// Sh runs script with sh -c, as [Machine.Run].
func (m *Machine) Sh(ctx context.Context, script string) (Result, error) {
	return m.Run(ctx, nil, "/bin/sh", "-c", script)
}

// Put writes data to path in the guest (created or truncated, parents made
// as needed) with mode, in chunks the channel carries.
func (m *Machine) Put(ctx context.Context, path string, mode os.FileMode, data []byte) error {
	for off := 0; off == 0 || off < len(data); off += channel.Chunk {
		end := min(off+channel.Chunk, len(data))
		req := &channel.Request{Op: "put", Path: path, Mode: uint32(mode.Perm()), Data: data[off:end], Append: off > 0}
		timeout := 2 * time.Minute
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		resp, err := m.exchange(req, timeout)
		if err != nil {
			return fmt.Errorf("put %s: %w", path, err)
		}
		if resp.Error != "" {
			return fmt.Errorf("put %s: the agent refused: %s", path, resp.Error)
		}
	}
	return nil
}

// exchange sends one request and reads its answer, waiting at most
// timeout plus the agent's own grace for killing and reporting.
func (m *Machine) exchange(req *channel.Request, timeout time.Duration) (channel.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		return channel.Response{}, errors.New("machine is closed")
	}
	m.conn.SetDeadline(time.Now().Add(timeout + 30*time.Second))
	if err := channel.Send(m.conn, req); err != nil {
		return channel.Response{}, err
	}
	var resp channel.Response
	if err := channel.Receive(m.conn, &resp); err != nil {
		return channel.Response{}, err
	}
	if resp.Ready {
		// The agent restarted and lost the request.
		return channel.Response{}, errors.New("the guest's agent restarted during the request")
	}
	return resp, nil
}

// ConsoleTail is the last n lines of the guest's serial console.
func (m *Machine) ConsoleTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "console.log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Close kills qemu (nothing in the guest is worth keeping: its disk is a
// snapshot) and removes the machine's directory. It is safe to call twice.
func (m *Machine) Close() error {
	m.mu.Lock()
	if m.conn != nil {
		m.conn.Close()
		m.conn = nil
	}
	m.mu.Unlock()
	select {
	case <-m.exited:
	default:
		m.cmd.Process.Kill()
		<-m.exited
	}
	return os.RemoveAll(m.dir)
}
