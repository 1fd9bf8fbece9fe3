package sockets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CheckDir enforces the rules for a directory that holds sockets: an
// absolute path that is not "/", a real directory (not a symbolic link,
// since chmod through a link would change its target), owned by the
// daemon's effective user, mode 0700 or, where a pair of roles shares a
// group, 0750. Directory permissions decide who may connect at all; the
// peer check on accept is the second lock.
func CheckDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("socket dir %q is not an absolute path; see docs/runbook.md#socket-dir", dir)
	}
	if filepath.Clean(dir) == "/" {
		return errors.New("socket dir is /, which every user can list; see docs/runbook.md#socket-dir")
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket dir %s: %w; see docs/runbook.md#socket-dir", dir, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("socket dir %s is a symbolic link; see docs/runbook.md#socket-dir", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket dir %s is not a directory; see docs/runbook.md#socket-dir", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("socket dir %s: cannot read its owner; see docs/runbook.md#socket-dir", dir)
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		return fmt.Errorf("socket dir %s is owned by uid %d, not by this daemon's uid %d; see docs/runbook.md#socket-dir", dir, st.Uid, euid)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 && perm != 0o750 {
		return fmt.Errorf("socket dir %s has mode %04o, want 0700 (or 0750 for a shared group); see docs/runbook.md#socket-dir", dir, perm)
	}
	return nil
}

// MakeDir creates dir (and missing parents) with the given mode, 0700 or
// 0750, and then checks it with [CheckDir]. An existing directory keeps
// its mode and must already pass the check: MakeDir never loosens or
// tightens what the owner set.
func MakeDir(dir string, mode fs.FileMode) error {
	if mode != 0o700 && mode != 0o750 {
		return fmt.Errorf("make socket dir %s: mode %04o is not 0700 or 0750", dir, mode)
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, mode); err != nil {
			return fmt.Errorf("make socket dir: %w", err)
		}
		// MkdirAll applies the umask; set the mode we were asked for.
		if err := os.Chmod(dir, mode); err != nil {
			return fmt.Errorf("make socket dir: %w", err)
		}
	}
	return CheckDir(dir)
}
