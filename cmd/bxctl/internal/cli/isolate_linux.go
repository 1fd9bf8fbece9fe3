package cli

import (
	"os/exec"
	"slices"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/layout"
	"wntrmute.dev/boxmaker/pkg/netns"
)

// isolate gives a role its own uid and gid with no supplementary groups
// and, for a role without network (loopd), a network namespace of its
// own, when the state directory has a user per role. The Podman service
// stays root's: rootful Podman (cgroups v1 refuses rootless).
func isolate(a *syscall.SysProcAttr, name string, u layout.Users) {
	if u.Single() || name == "podman" {
		return
	}
	id := u.Of(name)
	a.Credential = &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: []uint32{}}
	if slices.Contains(layout.NoNetwork, name) {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
}

// afterStart brings up `lo` in the namespace isolate made: a new
// namespace has it down.
func afterStart(cmd *exec.Cmd, name string, u layout.Users) error {
	if u.Single() || !slices.Contains(layout.NoNetwork, name) {
		return nil
	}
	return netns.LoopbackUp(cmd.Process.Pid)
}
