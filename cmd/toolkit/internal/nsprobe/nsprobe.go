// Package nsprobe reports, from inside a tool container, whether the
// container may make or enter a namespace: brokerd's startup probe runs
// `toolkit probe-namespaces` in a container made like every tool
// container and refuses to start unless each way is refused by seccomp.
//
// Invariant: the probe never makes a namespace or a process. Each attempt
// is a real system call whose other arguments make the kernel refuse it
// even where seccomp lets it through, with an error that differs from the
// filter's, so the answer tells the two apart:
//
//	unshare(CLONE_NEWUSER)          filter EPERM; else EINVAL (a Go program has several threads)
//	clone(CLONE_NEWUSER|CLONE_FS)   filter EPERM; else EINVAL (the two flags together are invalid)
//	clone3(NULL, 0)                 filter ENOSYS; else EINVAL (an argument struct of size 0)
//	setns(-1, CLONE_NEWUSER)        filter EPERM; else EBADF
package nsprobe

import (
	"fmt"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// An Attempt is one system call tried and the error number it returned
// (0 if it succeeded).
type Attempt struct {
	Name  string
	Errno syscall.Errno
}

// Try makes each attempt once.
func Try() []Attempt {
	call := func(name string, trap, a1, a2 uintptr) Attempt {
		_, _, e := unix.RawSyscall(trap, a1, a2, 0)
		return Attempt{name, e}
	}
	return []Attempt{
		call("unshare", unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0),
		call("clone", unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_FS, 0),
		call("clone3", unix.SYS_CLONE3, 0, 0),
		call("setns", unix.SYS_SETNS, ^uintptr(0), unix.CLONE_NEWUSER),
	}
}

// Report writes one line per attempt, "NAME ERRNO" (the number), and
// returns 0.
func Report(w io.Writer) int {
	for _, a := range Try() {
		fmt.Fprintf(w, "%s %d\n", a.Name, int(a.Errno))
	}
	return 0
}
