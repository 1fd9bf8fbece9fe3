package up

import (
	"os/exec"
	"slices"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/netns"
)

// isolate gives a role its own uid and gid with no supplementary groups
// and, for a role without network (loopd), a network namespace of its
// own, when the state directory has a user per role. The Podman service
// stays root's: rootful Podman (cgroups v1 refuses rootless).
func isolate(a *syscall.SysProcAttr, name string, u layout.Users, rootfulRunner bool) {
	if u.Single() || name == "podman" {
		return
	}
	id := u.Of(name)
	a.Credential = &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: []uint32{}}
	if slices.Contains(layout.NoNetwork, name) {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
	if name == layout.Brokerd && rootfulRunner {
		// The runner checks each container's mounts through
		// /proc/PID/root, which for rootful Podman's containers needs
		// CAP_SYS_PTRACE; a root Podman socket already makes brokerd
		// root-equivalent (docs/threat-model.md).
		a.AmbientCaps = []uintptr{capSysPtrace}
	}
}

// capSysPtrace is CAP_SYS_PTRACE (package syscall does not name it).
const capSysPtrace = 19

// afterStart brings up `lo` in the namespace isolate made: a new
// namespace has it down.
func afterStart(cmd *exec.Cmd, name string, u layout.Users) error {
	if u.Single() || !slices.Contains(layout.NoNetwork, name) {
		return nil
	}
	return netns.LoopbackUp(cmd.Process.Pid)
}
