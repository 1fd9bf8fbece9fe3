package layout

import (
	"fmt"
	"path"
	"strconv"

	"golang.org/x/sys/unix"
)

// GiveSocket gives the socket in socket directory e (its listener made
// it) the table's owner, group and mode: root:brokerd 0660 for the
// Podman service's socket, which checks no peer, so its permissions are
// what keep the other roles out. It reaches the socket as [Make] reaches
// an entry, one directory at a time from state through descriptors and
// never through a link, and changes the socket through a descriptor of
// its own (O_PATH: a socket cannot be opened otherwise), so a link or
// another file put in the socket's place is refused, never followed.
// With one user ([SingleUser]) it does nothing.
func GiveSocket(state string, e *Entry, u Users) error {
	if u.Single() {
		return nil // one user: the socket is already that user's
	}
	m, err := open("give socket", state, u)
	if err != nil {
		return err
	}
	defer m.close()
	dir, err := m.dir(e.Path)
	if err != nil {
		return err
	}
	rel := path.Join(e.Path, e.Socket)
	sock, err := unix.Openat(dir, e.Socket, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return m.fail(rel, err)
	}
	defer unix.Close(sock)
	var st unix.Stat_t
	if err := unix.Fstat(sock, &st); err != nil {
		return m.fail(rel, err)
	}
	switch t := st.Mode & unix.S_IFMT; t {
	case unix.S_IFSOCK:
	case unix.S_IFLNK:
		return fmt.Errorf("%s %s: a symbolic link where the table wants a socket; see docs/runbook.md#layout-link", m.op, m.abs(rel))
	default:
		return fmt.Errorf("%s %s: a %s where the table wants a socket; see docs/runbook.md#layout-kind", m.op, m.abs(rel), typeName(t))
	}
	uid, gid := e.IDs(u)
	if err := unix.Fchownat(sock, "", int(uid), int(gid), unix.AT_EMPTY_PATH); err != nil {
		return m.fail(rel, err)
	}
	// fchmod refuses an O_PATH descriptor; the descriptor's /proc link
	// names exactly the inode it holds (what glibc's fchmodat does for
	// AT_SYMLINK_NOFOLLOW).
	if err := unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(sock), modeBits(e.FilesFor(u)), 0); err != nil {
		return m.fail(rel, err)
	}
	return nil
}
