// Package netns brings up the loopback interface of another process's
// network namespace: a process started with CLONE_NEWNET (loopd under
// `bxctl up` as root, the containment probe) has only `lo`, and down.
// It uses setns (into the namespace and back), socket and two ioctls
// (get and set the flags), and no dependency.
//
// Invariant: the calling goroutine's OS thread enters the namespace and
// either returns to its own or is discarded (it stays locked and ends
// with its goroutine), so no other goroutine ever runs in the target
// namespace.
package netns

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// ifreq is struct ifreq with ifr_flags: a 16-byte name, the flags, and
// padding to the kernel's 40 bytes.
type ifreq struct {
	name  [16]byte
	flags uint16
	_     [22]byte
}

// LoopbackUp sets `lo` up in the network namespace of process pid.
func LoopbackUp(pid int) error { return In(pid, func() error { return ifUp("lo") }) }

// In runs f on an OS thread inside the network namespace of process pid
// (sockets f opens belong to that namespace) and returns f's error.
func In(pid int, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fail := func(err error) {
			done <- fmt.Errorf("netns %d: %w", pid, err)
			runtime.UnlockOSThread()
		}
		back, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			fail(err)
			return
		}
		defer back.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			fail(err)
			return
		}
		defer target.Close()
		if err := setns(target.Fd()); err != nil {
			fail(fmt.Errorf("enter: %w", err))
			return
		}
		ferr := f()
		if err := setns(back.Fd()); err != nil {
			// The thread stays locked and in the wrong namespace: it ends
			// when this goroutine does.
			done <- fmt.Errorf("netns %d: return to own namespace: %w", pid, err)
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

func setns(fd uintptr) error {
	if _, _, e := syscall.RawSyscall(sysSetns, fd, syscall.CLONE_NEWNET, 0); e != 0 {
		return e
	}
	return nil
}

func ifUp(name string) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	defer syscall.Close(fd)
	var r ifreq
	copy(r.name[:], name)
	if err := ioctl(fd, syscall.SIOCGIFFLAGS, &r); err != nil {
		return fmt.Errorf("loopback up: get %s flags: %w", name, err)
	}
	r.flags |= syscall.IFF_UP
	if err := ioctl(fd, syscall.SIOCSIFFLAGS, &r); err != nil {
		return fmt.Errorf("loopback up: set %s up: %w", name, err)
	}
	return nil
}

func ioctl(fd int, req uintptr, r *ifreq) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(r))); e != 0 {
		return e
	}
	return nil
}
