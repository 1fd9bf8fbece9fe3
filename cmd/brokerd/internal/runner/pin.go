package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/containers/podman/v5/pkg/bindings/containers"
	"golang.org/x/sys/unix"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
)

// pin is a mount path held open at check time: an O_PATH handle, opened
// with no symbolic link anywhere in the path, and its device and inode.
type pin struct {
	path     string
	fd       int
	dev, ino uint64
}

// noLinks opens without following a symbolic link in any component,
// magic links (/proc/PID/fd/N) included.
const noLinks = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// pinMounts opens every mount path of d (review item 1). A problem is the
// call's own mistake, as in checkMounts (which ran just before; a link
// or a missing path here means it changed in between).
func pinMounts(d policy.Decision) (pins []pin, problem string) {
	for _, m := range d.Mounts() {
		p := m.Path.String()
		fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: noLinks})
		if err != nil {
			closePins(pins)
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
				return nil, fmt.Sprintf("%s: the path goes through a symbolic link, which is never mounted; name the real path", p)
			}
			return nil, fmt.Sprintf("%s: %v", p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			closePins(pins)
			return nil, fmt.Sprintf("%s: %v", p, err)
		}
		pins = append(pins, pin{path: p, fd: fd, dev: st.Dev, ino: st.Ino})
	}
	return pins, ""
}

func closePins(pins []pin) {
	for _, p := range pins {
		unix.Close(p.fd)
	}
}

// checkPins compares, in a started container, each mount path as the
// container sees it (through /proc/PID/root, resolved inside that root
// with no link followed) with the handle taken at check time: the same
// device and inode, or the container is not the one the check allowed.
// It runs before the tool gets its input.
func (p *Podman) checkPins(conn context.Context, id string, pins []pin) error {
	if len(pins) == 0 {
		return nil
	}
	c, err := containers.Inspect(conn, id, nil)
	if err != nil {
		return requestFailed(conn, "inspect", err)
	}
	if c.State == nil || c.State.Pid <= 0 {
		return fail(ErrIsolation, "the started container has no process to check its mounts through")
	}
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", c.State.Pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(ErrIsolation, fmt.Sprintf("the started container's root cannot be opened to check its mounts: %v", err))
	}
	defer unix.Close(root)
	for _, pn := range pins {
		fd, err := unix.Openat2(root, strings.TrimPrefix(pn.path, "/"),
			&unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: noLinks | unix.RESOLVE_IN_ROOT})
		if err != nil {
			return fail(ErrIsolation, fmt.Sprintf("%s in the started container: %v", pn.path, err))
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		if err != nil || st.Dev != pn.dev || st.Ino != pn.ino {
			return fail(ErrIsolation, fmt.Sprintf("%s in the started container is not the file the mount check allowed", pn.path))
		}
	}
	return nil
}
