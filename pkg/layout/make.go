package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Make makes state as the table says under u: every entry marked Up that
// is missing, with its mode and (as root) its owner and group; an
// existing one keeps what it is unless it is the owner's doing that the
// table corrects. As root with a user per role it also gives each file
// the owner put in a role's directory, and each role's config, the
// table's owner, group and mode (so a grant written 0600 becomes 0640
// root:brokerd). It never follows a link and never changes a file with
// more than one link or one owned by anyone but the owner or root: a
// role that planted a link or a hard link to another file gains nothing.
func Make(state string, u Users) error {
	root := os.Geteuid() == 0
	for _, e := range Table {
		p := e.In(state)
		switch {
		case e.Kind == File:
			if err := adopt(e, p, e.ModeFor(u), u, root); err != nil {
				return err
			}
			continue
		case !e.Up:
			continue
		}
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(p, 0o700); err != nil {
				return fmt.Errorf("make %s: %w", p, err)
			}
		}
		if err := adopt(e, p, e.ModeFor(u), u, root); err != nil {
			return err
		}
		if e.Kind != Dir || e.Files == 0 || !root || u.Single() {
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return fmt.Errorf("make %s: %w", p, err)
		}
		for _, d := range ents {
			if d.Type().IsRegular() {
				f := &Entry{Kind: File, Owner: e.Owner, Group: e.Group}
				if e == &Config {
					continue // each config has its own entry
				}
				if e == &Grants || e == &Logs {
					f.Owner = Owner
				}
				if err := adopt(f, filepath.Join(p, d.Name()), e.FilesFor(u), u, root); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// adopt gives the file or directory at p the entry's mode and, as root,
// its ids, if it exists and is the owner's (or root's) or already the
// entry's own owner's.
func adopt(e *Entry, p string, mode fs.FileMode, u Users, root bool) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("make %s: %w", p, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("make %s: a symbolic link where the table wants a real %s; see docs/runbook.md#layout-link", p, kindName(e.Kind))
	}
	st := fi.Sys().(*syscall.Stat_t)
	uid, gid := e.IDs(u)
	if st.Uid != uid && st.Uid != 0 && st.Uid != u.Of(Owner).UID {
		return fmt.Errorf("make %s: owned by uid %d, neither the owner nor %s; see docs/runbook.md#layout-owner", p, st.Uid, e.Owner)
	}
	if fi.Mode().IsRegular() && st.Nlink > 1 {
		return fmt.Errorf("make %s: has %d hard links; see docs/runbook.md#layout-link", p, st.Nlink)
	}
	if root && (st.Uid != uid || st.Gid != gid) {
		if err := os.Lchown(p, int(uid), int(gid)); err != nil {
			return fmt.Errorf("make %s: %w", p, err)
		}
	}
	if unixMode(fi) != mode && (root || st.Uid == uint32(os.Geteuid())) {
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("make %s: %w", p, err)
		}
	}
	return nil
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
