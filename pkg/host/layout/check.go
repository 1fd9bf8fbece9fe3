package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// A Problem is one entry that does not match the table.
type Problem struct {
	Path    string // the entry's absolute path
	Pointer string // its runbook pointer ("see docs/runbook.md" and the anchor: layout-link, -owner, -writable, -mode, -missing)
	What    string // what is wrong, without the path
}

func (p Problem) Error() string {
	return fmt.Sprintf("layout: %s %s; %s", p.Path, p.What, p.Pointer)
}

func statOf(fi fs.FileInfo) *syscall.Stat_t {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st
	}
	return &syscall.Stat_t{Uid: ^uint32(0), Gid: ^uint32(0)}
}

// unixMode is fi's permission and setgid bits as a FileMode.
func unixMode(fi fs.FileInfo) fs.FileMode { return fi.Mode() & (fs.ModePerm | fs.ModeSetgid) }

// match checks the file at path against e under u. A missing entry is
// nil when missingOK.
func match(e *Entry, path string, u Users, missingOK bool) *Problem {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if missingOK {
			return nil
		}
		return &Problem{path, "see docs/runbook.md#layout-missing", "is missing"}
	}
	if err != nil {
		return &Problem{path, "see docs/runbook.md#layout-missing", "cannot be read: " + err.Error()}
	}
	want := e.ModeFor(u)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &Problem{path, "see docs/runbook.md#layout-link", "is a symbolic link; the table wants a real " + kindName(e.Kind)}
	case (e.Kind == File) != fi.Mode().IsRegular() || (e.Kind != File) != fi.IsDir():
		return &Problem{path, "see docs/runbook.md#layout-link", "is not a " + kindName(e.Kind)}
	}
	st := statOf(fi)
	uid, gid := e.IDs(u)
	switch {
	case st.Uid != uid:
		return &Problem{path, "see docs/runbook.md#layout-owner", fmt.Sprintf("is owned by uid %d, want %d (%s)", st.Uid, uid, e.Owner)}
	case !u.Single() && st.Gid != gid:
		return &Problem{path, "see docs/runbook.md#layout-owner", fmt.Sprintf("has group %d, want %d (%s)", st.Gid, gid, e.GroupRole())}
	case unixMode(fi)&^want&0o077 != 0:
		return &Problem{path, "see docs/runbook.md#layout-writable", fmt.Sprintf("has mode %s, wider than the table's %s", modeText(unixMode(fi)), modeText(want))}
	case unixMode(fi) != want:
		return &Problem{path, "see docs/runbook.md#layout-mode", fmt.Sprintf("has mode %s, want %s", modeText(unixMode(fi)), modeText(want))}
	}
	return nil
}

func kindName(k Kind) string {
	if k == File {
		return "file"
	}
	return "directory"
}

func modeText(m fs.FileMode) string {
	n := uint32(m.Perm())
	if m&fs.ModeSetgid != 0 {
		n |= 0o2000
	}
	return fmt.Sprintf("%04o", n)
}

// Check is what role checks at start-up in state under u: that it runs
// as the table's uid and gid with no other groups (with a user per
// role), and that every entry it owns or shares, its config and the
// directories above them match the table: owner, group, mode, no link.
// An entry its writer makes later may be missing; the rest must exist.
// The first problem is returned, an error ending in its runbook pointer.
func Check(state string, u Users, role string) error {
	if !u.Single() {
		id := u.Of(role)
		if uint32(os.Geteuid()) != id.UID || uint32(os.Getegid()) != id.GID {
			return fmt.Errorf("layout: %s runs as uid %d gid %d, but %s says uid %d gid %d; see docs/runbook.md#layout-uid-shared",
				role, os.Geteuid(), os.Getegid(), UsersFile.In(state), id.UID, id.GID)
		}
		if gs, err := os.Getgroups(); err == nil && slices.ContainsFunc(gs, func(g int) bool { return uint32(g) != id.GID }) {
			return fmt.Errorf("layout: %s has supplementary groups %v; it must have none; see docs/runbook.md#layout-uid-shared", role, gs)
		}
		for _, other := range append([]string{Owner}, Daemons...) {
			if other != role && u.Of(other).UID == id.UID {
				return fmt.Errorf("layout: %s shares uid %d with %s; see docs/runbook.md#layout-uid-shared", role, id.UID, other)
			}
		}
	}
	es := append([]*Entry{&State, &Run, &Config, &UsersFile, &Secrets, ConfigFile(role)}, Owned(role)...)
	for _, e := range es {
		missingOK := !e.Up || e == &UsersFile || (e.Kind == File && e != ConfigFile(role))
		if e == &UsersFile && u.Single() {
			continue
		}
		if p := match(e, e.In(state), u, missingOK); p != nil {
			return p
		}
	}
	return nil
}

// Verify checks every entry of the table in state under u, and the files
// directly inside each Dir against its Files mode, and returns every
// problem (none for a state directory as the table says). It only reads;
// `bxctl doctor` reports each problem with its anchor.
func Verify(state string, u Users) []Problem {
	var ps []Problem
	for _, e := range Table {
		if e == &UsersFile && u.Single() {
			continue
		}
		if p := match(e, e.In(state), u, !e.Up); p != nil {
			ps = append(ps, *p)
			continue
		}
		if e.Kind != Dir || e.Files == 0 || e == &Config {
			continue
		}
		ents, _ := os.ReadDir(e.In(state))
		for _, d := range ents {
			if d.IsDir() {
				continue
			}
			f := &Entry{Kind: File, Mode: e.Files, Owner: e.Owner, Group: e.Group}
			if e == &Logs || e == &Grants || e == &MCP {
				f.Owner = Owner
			}
			if p := match(f, e.In(state)+"/"+d.Name(), u, true); p != nil {
				ps = append(ps, *p)
			}
		}
	}
	return ps
}
