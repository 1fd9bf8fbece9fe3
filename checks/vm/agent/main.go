// Command boxmaker-agent is the VM test host's agent: it runs inside the
// guest, started by boxmaker-agent.service, and serves package channel's
// protocol on the virtio-serial port named as its one argument. It runs
// what the host asks as root, one request at a time, and answers with the
// exit code and both outputs; it writes the files the host puts.
//
// The guest has no network device, so this port is the only way in; it
// exists only in the test VM's image (checks/vm/image.sh), never in a
// deployment.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/checks/vm/channel"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: boxmaker-agent /dev/virtio-ports/NAME")
		os.Exit(2)
	}
	for {
		// The port reads EOF while the host side is not connected, and
		// the device appears only once udev has loaded virtio_console:
		// keep reopening, quietly, until the host is there.
		if err := serve(os.Args[1]); err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintln(os.Stderr, "boxmaker-agent:", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func serve(path string) error {
	port, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer port.Close()
	if err := channel.Send(port, &channel.Response{Ready: true}); err != nil {
		return err
	}
	for {
		var req channel.Request
		if err := channel.Receive(port, &req); err != nil {
			return err
		}
		var resp channel.Response
		switch req.Op {
		case "run":
			resp = run(req)
		case "put":
			resp = put(req)
		default:
			resp = channel.Response{Exit: -1, Error: fmt.Sprintf("unknown op %q", req.Op)}
		}
		if err := channel.Send(port, &resp); err != nil {
			return err
		}
	}
}

// capped keeps at most channel.OutputMax bytes and notes whether more came.
type capped struct {
	bytes.Buffer
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := channel.OutputMax - c.Len(); len(p) > room {
		c.cut = true
		c.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

func run(req channel.Request) channel.Response {
	if len(req.Argv) == 0 {
		return channel.Response{Exit: -1, Error: "run: empty argv"}
	}
	ctx := context.Background()
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	var stdout, stderr capped
	cmd.Stdin = bytes.NewReader(req.Stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"}
	// A timeout kills the whole process group, and a child that keeps
	// the output pipes open cannot hold the answer back for long.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	resp := channel.Response{Exit: -1, Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Truncated: stdout.cut || stderr.cut}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		resp.Error = fmt.Sprintf("run %s: timed out after %d ms", req.Argv[0], req.TimeoutMS)
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		resp.Exit = exit.ExitCode()
	case err != nil:
		resp.Error = fmt.Sprintf("run %s: %v", req.Argv[0], err)
	default:
		resp.Exit = 0
	}
	return resp
}

func put(req channel.Request) channel.Response {
	if !filepath.IsAbs(req.Path) {
		return channel.Response{Exit: -1, Error: fmt.Sprintf("put: path %q is not absolute", req.Path)}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if req.Append {
		flags = os.O_WRONLY | os.O_APPEND
	}
	err := os.MkdirAll(filepath.Dir(req.Path), 0o755)
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(req.Path, flags, os.FileMode(req.Mode&0o7777))
	}
	if err == nil {
		_, err = f.Write(req.Data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Chmod(req.Path, os.FileMode(req.Mode&0o7777))
	}
	if err != nil {
		return channel.Response{Exit: -1, Error: fmt.Sprintf("put %s: %v", req.Path, err)}
	}
	return channel.Response{}
}
