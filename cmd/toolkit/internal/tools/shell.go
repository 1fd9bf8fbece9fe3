package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// shellEnv is a shell command's whole environment: nothing is inherited.
func shellEnv(secretFile string) []string {
	env := []string{"PATH=/bin:/usr/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8"}
	if secretFile != "" {
		env = append(env, "BOXMAKER_SECRET_FILE="+secretFile)
	}
	return env
}

// runShell runs sh -c COMMAND in the workdir, its stdin empty and its
// stdout and stderr the toolkit's own. A non-zero exit is a tool error
// whose message, the last stderr line, says how the command ended.
func runShell(ctx context.Context, env Env, a toolargs.Shell, secretFile string) error {
	wd := a.Workdir.String()
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		return failf("workdir %s does not exist or is not a directory", wd)
	}
	cmd := exec.CommandContext(ctx, env.Shell, "-c", a.Command)
	cmd.Dir = wd
	cmd.Env = shellEnv(secretFile)
	cmd.Stdout = env.Stdout
	cmd.Stderr = env.Stderr
	// Own process group, so a cancelled call takes the command's
	// children with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A background child that keeps the output open must not hold the
	// call once the command has exited.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return failf("could not start %s: %v", env.Shell, err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return failf("killed by signal %d", int(ws.Signal()))
	}
	return &toolError{fmt.Sprintf("exit status %d", ee.ExitCode())}
}
