package cli

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// ttyOutput reports whether w is a terminal, the one place bxctl writes
// escape sequences of its own. It asks the kernel for the terminal
// settings (TCGETS), which only a terminal has; a file, a pipe or
// /dev/null is not one.
func ttyOutput(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var errno syscall.Errno
	err = raw.Control(func(fd uintptr) {
		var t syscall.Termios
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	})
	return err == nil && errno == 0
}
