package gateway

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// attachments is the attachments/ directory of the state directory
// (layout.Attachments): one directory per session, <session>/<file id>.
//
// Invariant: a file appears under its id whole or not at all. It is
// written as an unnamed file in its directory (O_TMPFILE), synced, and
// only then linked under its name, so a gatewayd killed mid-download
// (kill -9 included) leaves nothing behind; where the file system has
// no O_TMPFILE, a ".part-" file is renamed over the name instead, and
// the next start removes any such part left ([attachments.sweep]).
//
// Images go to images/ (layout.Images, which loopd reads) instead, by
// the name's word (the server's mime type, from the extension); the
// sniffed type must then agree (attach.go), since a file cannot move
// between the two: each directory's setgid group is the one its reader
// has, and gatewayd can give no file another.
type attachments struct {
	root   string
	images string
}

func openAttachments(state string) *attachments {
	return &attachments{root: layout.Attachments.In(state), images: layout.Images.In(state)}
}

// partPrefix starts the name of a file still being written (the
// fallback without O_TMPFILE).
const partPrefix = ".part-"

// adir is one session's directory.
type adir struct{ path string }

// sessionDir is session's directory, made (mode 0750; it inherits
// attachments/' setgid group) if it is not there. A link or anything but
// a directory under the session's name is refused.
func (a *attachments) sessionDir(session string, image bool) (*adir, error) {
	if err := wire.CheckSessionID(session); err != nil {
		return nil, err
	}
	root := a.root
	if image {
		root = a.images
	}
	p := filepath.Join(root, session)
	if err := os.Mkdir(p, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", p)
	}
	return &adir{path: p}, nil
}

// temp is a new file to write in d: unnamed if the file system allows.
func (d *adir) temp() (*os.File, error) {
	fd, err := unix.Open(d.path, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o640)
	if err == nil {
		return os.NewFile(uintptr(fd), filepath.Join(d.path, "(unnamed)")), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return nil, err
	}
	f, err := os.CreateTemp(d.path, partPrefix+"*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o640); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// commit gives f, written in full, the name id in d, replacing a file of
// that name (the same file fetched again after a restart), and makes
// the name durable. It closes f.
func (d *adir) commit(f *os.File, id string) error {
	defer f.Close()
	if !wire.FileIDPattern.MatchString(id) {
		return fmt.Errorf("file id %q", id)
	}
	final := filepath.Join(d.path, id)
	if err := f.Sync(); err != nil {
		return err
	}
	if named := f.Name(); strings.HasPrefix(filepath.Base(named), partPrefix) {
		if err := os.Rename(named, final); err != nil {
			os.Remove(named)
			return err
		}
	} else {
		// Linking the open unnamed file through /proc needs no
		// privilege (AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH).
		src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
		err := unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW)
		if errors.Is(err, unix.EEXIST) {
			if err = os.Remove(final); err == nil {
				err = unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW)
			}
		}
		if err != nil {
			return fmt.Errorf("link %s: %w", final, err)
		}
	}
	dir, err := os.Open(d.path)
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// sweep removes the parts a gatewayd stopped mid-write left (the
// fallback's named temporary files); unnamed ones vanish by themselves.
// It runs at start, before any post is handled.
func (a *attachments) sweep() error {
	var errs []error
	for _, root := range []string{a.root, a.images} {
		ents, err := os.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			parts, _ := filepath.Glob(filepath.Join(root, e.Name(), partPrefix+"*"))
			for _, p := range parts {
				errs = append(errs, os.Remove(p))
			}
		}
	}
	return errors.Join(errs...)
}
