package layout

import (
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// OpenLog opens role's log, logs/<role>.log, for appending, creating it
// 0600: bxctl up (as root) hands the role this descriptor for its
// output. It reaches logs/ as [Make] reaches an entry, through
// descriptors and never a link, and opens the log itself with
// O_NOFOLLOW|O_NONBLOCK: a link, FIFO or other file put in its place
// (which would have root append a role's output to its target) is
// refused, and so is a log with more than one link or of another owner
// than root or the owner.
func OpenLog(state, role string, u Users) (*os.File, error) {
	m, err := open("open log", state, u)
	if err != nil {
		return nil, err
	}
	defer m.close()
	dir, err := m.dir(Logs.Path)
	if err != nil {
		return nil, err
	}
	rel := path.Join(Logs.Path, role+".log")
	lf, err := unix.Openat(dir, role+".log", unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, m.openErr(rel, dir, role+".log", err, File)
	}
	var st unix.Stat_t
	if err := unix.Fstat(lf, &st); err != nil {
		unix.Close(lf)
		return nil, m.fail(rel, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		unix.Close(lf)
		return nil, m.kind(rel, &st, File, false)
	case st.Nlink > 1:
		unix.Close(lf)
		return nil, fmt.Errorf("%s %s: has %d hard links; see docs/runbook.md#layout-link", m.op, m.abs(rel), st.Nlink)
	case st.Uid != 0 && st.Uid != u.Of(Owner).UID:
		unix.Close(lf)
		return nil, fmt.Errorf("%s %s: owned by uid %d, neither root nor the owner; see docs/runbook.md#layout-owner", m.op, m.abs(rel), st.Uid)
	}
	return os.NewFile(uintptr(lf), m.abs(rel)), nil
}
