// Package procinfo reads what a status shows of another role's process:
// the pid listening on a Unix socket (SO_PEERCRED) and the version of
// the binary it runs (/proc/<pid>/exe's build information).
//
// Invariant: it only reads, and what it cannot read (another user's
// process, with a user per role) is "unknown", never an error that
// fails a status.
package procinfo

import (
	"debug/buildinfo"
	"net"
	"strconv"

	"golang.org/x/sys/unix"

	"wntrmute.dev/boxmaker/pkg/host/daemon"
)

// VersionOf is the version of the binary process pid runs, as
// daemon.Version words it: "unknown" when this user may not read it.
func VersionOf(pid int) string {
	if pid <= 0 {
		return "unknown"
	}
	bi, err := buildinfo.ReadFile("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return "unknown"
	}
	return daemon.VersionString(bi)
}

// PeerPID is the pid of the process at the other end of c (SO_PEERCRED),
// 0 when the kernel does not say.
func PeerPID(c *net.UnixConn) int {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil || cerr != nil || cred == nil {
		return 0
	}
	return int(cred.Pid)
}
