package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The flags of every open below the state directory. A directory is
// opened only as a directory and never through a link; a file never
// through a link, without waiting (a FIFO would block an open for
// reading) and without becoming a controlling terminal.
const (
	dirFlags  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fileFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
)

// Make makes state as the table says under u: every entry marked Up that
// is missing, with its mode and (as root) its owner and group; an
// existing one keeps what it is unless it is the owner's doing that the
// table corrects. As root with a user per role it also gives each file
// the owner put in a role's directory, and each role's config, the
// table's owner, group and mode (so a grant written 0600 becomes 0640
// root:brokerd).
//
// Make runs as root over directories the roles write, while they may
// be running, so it never names a path below state twice: it opens
// state (which must not itself be a link; the directories above it are
// the owner's choice and are followed) and every directory below it
// one name at a time relative to its parent's descriptor, never through
// a link, and changes each entry through a descriptor of its own
// (fchown, fchmod). A role that swaps an entry for a link, or a
// directory for a link to /etc, between Make's look and its change
// changes only what Make already holds open. Make refuses, with the
// entry's runbook pointer, a link where an entry or a directory on the
// way to one should be, or in a role's directory (layout-link), an
// entry that is not the directory or regular file the table wants (a
// FIFO, a socket, a device: layout-kind), a file with more than one link
// (layout-link) and one owned by anyone but the owner, root or the
// entry's owner (layout-owner). Subdirectories of a role's directory are
// its writer's own and are not entered; what is not a regular file in
// the owner's directories (grants/, jobs/, logs/) is passed over.
func Make(state string, u Users) error {
	m, err := open("make", state, u)
	if err != nil {
		return err
	}
	defer m.close()
	for _, e := range Table {
		if err := m.entry(e); err != nil {
			return err
		}
	}
	return nil
}

// maker is one walk of a state directory from its descriptor down:
// [Make]'s, [GiveSocket]'s or [OpenLog]'s.
type maker struct {
	op    string // the operation, which starts each error: "make", "open log", "give socket"
	state string
	u     Users
	root  bool
	euid  uint32
	// dirs are the directories opened so far, by path relative to
	// state: each opened from its parent's descriptor with dirFlags.
	dirs map[string]int
}

// open starts a walk of state for op: it opens state itself, which
// must not be a link (the directories above it are the owner's choice
// and are followed).
func open(op, state string, u Users) (*maker, error) {
	m := &maker{op: op, state: filepath.Clean(state), u: u, root: os.Geteuid() == 0, euid: uint32(os.Geteuid()), dirs: map[string]int{}}
	fd, err := unix.Open(m.state, dirFlags, 0)
	if err != nil {
		return nil, m.openErr(".", unix.AT_FDCWD, m.state, err, Dir)
	}
	m.dirs["."] = fd
	return m, nil
}

func (m *maker) close() {
	for _, fd := range m.dirs {
		unix.Close(fd)
	}
}

// entry makes or adopts one entry of the table.
func (m *maker) entry(e *Entry) error {
	if e.Kind == File {
		parent, err := m.dir(path.Dir(e.Path))
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a file its writer makes, in a directory it has not made yet
		}
		if err != nil {
			return err
		}
		return m.file(e, parent, e.Path, e.ModeFor(m.u), named)
	}
	if !e.Up {
		return nil
	}
	fd, err := m.mkdir(e.Path)
	if err != nil {
		return err
	}
	if err := m.adopt(e, fd, e.Path, e.ModeFor(m.u)); err != nil {
		return err
	}
	if e.Kind != Dir || e.Files == 0 || !m.root || m.u.Single() || e == &Config {
		return nil // each config has its own entry
	}
	return m.files(e, fd)
}

// files adopts each regular file directly in e's directory, open at fd,
// with the mode and ids the table gives its files.
func (m *maker) files(e *Entry, fd int) error {
	dup, err := unix.Openat(fd, ".", dirFlags, 0)
	if err != nil {
		return m.fail(e.Path, err)
	}
	d := os.NewFile(uintptr(dup), m.abs(e.Path))
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return m.fail(e.Path, err)
	}
	makeStep("listed", e.Path)
	f := &Entry{Kind: File, Owner: e.Owner, Group: e.Group}
	if e == &Grants || e == &MCP || e == &Logs {
		f.Owner = Owner
	}
	// Besides regular files: in a role's directory, which the role
	// writes, a link, FIFO, socket or device is refused (no role keeps
	// one; one there was planted). In the owner's (grants/, jobs/,
	// logs/), which no role can write, it is the owner's and is passed
	// over as it always was: a grant may be a link into the Nix store
	// (package ownership follows it), and Make never follows it.
	in := inRoles
	if e.Owner == Owner {
		in = inOwners
	}
	for _, name := range names {
		if err := m.file(f, fd, path.Join(e.Path, name), e.FilesFor(m.u), in); err != nil {
			return err
		}
	}
	return nil
}

// dir is the descriptor of the directory at rel, opened one name at a
// time from state; a missing one is an error wrapping fs.ErrNotExist.
func (m *maker) dir(rel string) (int, error) {
	if fd, ok := m.dirs[rel]; ok {
		return fd, nil
	}
	parent, err := m.dir(path.Dir(rel))
	if err != nil {
		return -1, err
	}
	fd, err := unix.Openat(parent, path.Base(rel), dirFlags, 0)
	if err != nil {
		return -1, m.openErr(rel, parent, path.Base(rel), err, Dir)
	}
	m.dirs[rel] = fd
	return fd, nil
}

// mkdir makes the directory at rel (0700, root's until adopted) if it
// is missing, and opens it.
func (m *maker) mkdir(rel string) (int, error) {
	if rel == "." {
		return m.dirs["."], nil
	}
	parent, err := m.dir(path.Dir(rel))
	if err != nil {
		return -1, err
	}
	if err := unix.Mkdirat(parent, path.Base(rel), 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, m.fail(rel, err)
	}
	return m.dir(rel)
}

// listed is where [maker.file] found a file.
type listed int

const (
	named    listed = iota // a table entry, looked up by its name
	inRoles                // found in a role's directory
	inOwners               // found in the owner's directory
)

// file adopts the file at rel, in the directory open at dir, as entry e
// with mode; a missing file is nil, and so is a directory found in a
// directory (a subdirectory of a role's directory is its writer's), and
// anything but a regular file found in the owner's.
func (m *maker) file(e *Entry, dir int, rel string, mode fs.FileMode, in listed) error {
	name := path.Base(rel)
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return m.fail(rel, err)
	}
	t := st.Mode & unix.S_IFMT
	if (in != named && t == unix.S_IFDIR) || (in == inOwners && t != unix.S_IFREG) {
		return nil
	}
	// Judge the kind before opening: a FIFO or a device is never opened.
	if err := m.kind(rel, &st, File, in == inRoles); err != nil {
		return err
	}
	fd, err := unix.Openat(dir, name, fileFlags, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // its writer renamed it away since
	}
	if err != nil {
		return m.openErr(rel, dir, name, err, File)
	}
	defer unix.Close(fd)
	return m.adopt(e, fd, rel, mode)
}

// adopt gives the file or directory open at fd the entry's mode and, as
// root, its ids, if it is the owner's (or root's) or already the entry's
// own owner's. It judges only what fd is, so nothing done to rel's path
// meanwhile can redirect it.
func (m *maker) adopt(e *Entry, fd int, rel string, mode fs.FileMode) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return m.fail(rel, err)
	}
	if err := m.kind(rel, &st, e.Kind, false); err != nil {
		return err
	}
	uid, gid := e.IDs(m.u)
	if st.Uid != uid && st.Uid != 0 && st.Uid != m.u.Of(Owner).UID {
		return fmt.Errorf("%s %s: owned by uid %d, neither the owner nor %s; see docs/runbook.md#layout-owner", m.op, m.abs(rel), st.Uid, e.Owner)
	}
	if e.Kind == File && st.Nlink > 1 {
		return fmt.Errorf("%s %s: has %d hard links; see docs/runbook.md#layout-link", m.op, m.abs(rel), st.Nlink)
	}
	makeStep("checked", rel)
	if m.root && (st.Uid != uid || st.Gid != gid) {
		if err := unix.Fchown(fd, int(uid), int(gid)); err != nil {
			return m.fail(rel, err)
		}
		// A chown may clear set-id bits: judge the mode as it is now.
		if err := unix.Fstat(fd, &st); err != nil {
			return m.fail(rel, err)
		}
	}
	want := modeBits(mode)
	if st.Mode&0o7777 != want && (m.root || st.Uid == m.euid) {
		if err := unix.Fchmod(fd, want); err != nil {
			return m.fail(rel, err)
		}
	}
	return nil
}

// kind refuses st unless it is what k wants: a regular file for File, a
// directory for the others. listed is an entry found in a directory of
// files, where a directory would have been passed over.
func (m *maker) kind(rel string, st *unix.Stat_t, k Kind, listed bool) error {
	t, want := st.Mode&unix.S_IFMT, "where the table wants a real "+kindName(k)
	if listed {
		want = "among " + path.Dir(rel) + "/'s files, where the table wants only real files and directories"
	}
	switch {
	case t == unix.S_IFLNK:
		return fmt.Errorf("%s %s: a symbolic link %s; see docs/runbook.md#layout-link", m.op, m.abs(rel), want)
	case (k == File) != (t == unix.S_IFREG) || (k != File) != (t == unix.S_IFDIR):
		return fmt.Errorf("%s %s: a %s %s; see docs/runbook.md#layout-kind", m.op, m.abs(rel), typeName(t), want)
	}
	return nil
}

// openErr is the refusal for an open of name in dir (rel's path) that
// failed with err: a link or another kind of file than k is the
// table's refusal; anything else is the open's own error.
func (m *maker) openErr(rel string, dir int, name string, err error, k Kind) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENXIO) {
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			if kerr := m.kind(rel, &st, k, false); kerr != nil {
				return kerr
			}
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%s %s: %w", m.op, m.abs(rel), fs.ErrNotExist)
	}
	return m.fail(rel, err)
}

func (m *maker) fail(rel string, err error) error {
	return fmt.Errorf("%s %s: %w", m.op, m.abs(rel), err)
}

// abs is rel's path for a message.
func (m *maker) abs(rel string) string { return filepath.Join(m.state, filepath.FromSlash(rel)) }

// modeBits is m (permission and setgid) as mode bits for chmod.
func modeBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetgid != 0 {
		b |= unix.S_ISGID
	}
	return b
}

// typeName names a file type (st_mode & S_IFMT) for a refusal.
func typeName(t uint32) string {
	switch t {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return fmt.Sprintf("file of type %#o", t)
}

// Enterable checks that every directory above state lets the role users
// pass (o+x), as they must reach state's entries by path; bxctl up
// refuses a state directory they cannot reach rather than loosen a
// directory that is not its own.
func Enterable(state string, u Users) error {
	if u.Single() {
		return nil
	}
	for d := filepath.Dir(state); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("layout: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("layout: %s (above the state directory) has mode %s: the role users cannot pass it; see docs/runbook.md#layout-unreachable", d, modeText(unixMode(fi)))
		}
		if d == "/" {
			return nil
		}
	}
}
