// Package ownership decides whether a file the owner writes by hand may be
// believed: a grant, a config, soul.md, the owner's audit anchors. It is
// the one place every role asks.
//
// # The rule
//
// A file is safe when nobody but root and the trusted users ([Owners])
// can have written it or can put another file in its place. [Owners.Check]
// walks the path from / one component at a time, following every symbolic
// link (the NixOS module links files from the store), and refuses when the
// file, the real target of a link, or any directory passed through
//
//   - is owned by a uid that is not trusted, or
//   - is writable by its group or by everyone.
//
// One exception keeps /tmp-like directories usable above the file: a
// directory writable by others but sticky (mode 1777, as /tmp) lets others
// add entries but not rename or remove anyone else's, so it is accepted
// as an ancestor when the entry below it is owned by a trusted uid. The
// file itself, and the directory a caller checks as a whole (the grant
// directory, whose listing is authority), get no such exception.
//
// What lies inside the Nix store (/nix/store/...) is accepted without a
// look at its owner or mode: the store is read-only and its paths are
// named by the hash of their content. /nix and /nix/store themselves are
// checked as directories on the way. A link inside the store that leads
// out of it is followed, and what it leads to is checked.
//
// # Invariants
//
//   - [Owners] always trusts root: root can write any file anyway.
//   - [Owners.ReadFile] reads only a file that passed [Owners.Check], and
//     only if the file it opens is the one it checked (same device and
//     inode), so a swap between the check and the read is refused.
//   - An [*UnsafeError] names the path component that failed and why,
//     and points at docs/runbook.md#owner-file-unsafe.
//   - / owned by a uid this process's user namespace does not map (the
//     Nix build sandbox's) is refused, except in a test binary that called
//     [TestOnlyTrustSandboxRoot], and there only as a directory on the way.
package ownership

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// storeDir is the Nix store. A variable only so that the package's own
// tests can stand a directory of theirs in for it.
var storeDir = "/nix/store"

// maxLinks bounds the links one walk follows, as the kernel's own limit
// (40) bounds a path lookup.
const maxLinks = 40

// Owners is the set of users whose files are believed: root, and the uids
// [Trust] was given. The zero Owners trusts root only.
type Owners struct {
	uids []uint32 // sorted, without duplicates; root is implied
}

// Trust returns the Owners trusting root and uids.
func Trust(uids ...uint32) Owners {
	var o Owners
	for _, u := range uids {
		if u != 0 && !slices.Contains(o.uids, u) {
			o.uids = append(o.uids, u)
		}
	}
	slices.Sort(o.uids)
	return o
}

// Self is the Owners trusting root and the uid of this process: the rule
// for a daemon's own config and for files in its own directories.
func Self() Owners { return Trust(uint32(os.Getuid())) }

// Has reports whether uid is trusted.
func (o Owners) Has(uid uint32) bool { return uid == 0 || slices.Contains(o.uids, uid) }

// String lists the trusted users: "root or uid 1000".
func (o Owners) String() string {
	parts := []string{"root"}
	for _, u := range o.uids {
		parts = append(parts, "uid "+strconv.FormatUint(uint64(u), 10))
	}
	return strings.Join(parts, " or ")
}

// UnsafeError is a file that fails the rule.
type UnsafeError struct {
	Path   string // the path as the caller gave it
	At     string // the component that failed: the file, a directory on its path, or a link's target
	Reason string // why, without the path
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("check %s: %s; see docs/runbook.md#owner-file-unsafe", e.Path, e.Explain())
}

// Explain is the reason with the failing component named, and no runbook
// pointer, for callers that put it inside a message of their own.
func (e *UnsafeError) Explain() string {
	if e.At == e.Path {
		return e.At + " " + e.Reason
	}
	return e.At + " (on its path) " + e.Reason
}

// Check applies the rule to path (a file, or a directory judged as a
// whole) and returns the real path it leads to, every link resolved. An
// error is an [*UnsafeError] when the rule refuses, or the lookup's own
// error (a missing file, a loop of links) wrapped.
func (o Owners) Check(path string) (string, error) {
	real, _, err := o.walk(path)
	return real, err
}

// ReadFile checks path and reads the file it leads to, refusing one
// larger than max bytes, one that is not a regular file, and one that is
// not the file checked (replaced between the check and the open).
func (o Owners) ReadFile(path string, max int) ([]byte, error) {
	real, checked, err := o.walk(path)
	if err != nil {
		return nil, err
	}
	if !checked.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !os.SameFile(checked, opened) {
		return nil, fmt.Errorf("read %s: the file changed while it was checked; try again", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("read %s: %w", path, &TooLargeError{Max: max})
	}
	return b, nil
}

// walk resolves path component by component from /, judging each real
// location it passes through, and returns the final one and its Lstat.
func (o Owners) walk(path string) (string, fs.FileInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, fmt.Errorf("check %s: %w", path, err)
	}
	unsafe := func(at, format string, args ...any) error {
		return &UnsafeError{Path: path, At: at, Reason: fmt.Sprintf(format, args...)}
	}
	cur := "/"
	fi, err := os.Lstat(cur)
	if err != nil {
		return "", nil, fmt.Errorf("check %s: %w", path, err)
	}
	todo := split(abs)
	if err := o.judge(cur, fi, len(todo) == 0, false, unsafe); err != nil {
		return "", nil, err
	}
	// sticky: cur is writable by others but sticky, so the entry below
	// it must be owned by a trusted uid, link or not.
	sticky := fi.Mode()&fs.ModeSticky != 0 && fi.Mode().Perm()&0o022 != 0
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case ".":
			continue
		case "..":
			// cur holds no links, so its parent is the real parent.
			// Going up passes back through directories already judged.
			cur = filepath.Dir(cur)
			fi, err = os.Lstat(cur)
			if err != nil {
				return "", nil, fmt.Errorf("check %s: %w", path, err)
			}
			sticky = fi.Mode()&fs.ModeSticky != 0 && fi.Mode().Perm()&0o022 != 0
			continue
		}
		next := filepath.Join(cur, name)
		fi, err = os.Lstat(next)
		if err != nil {
			return "", nil, fmt.Errorf("check %s: %w", path, err)
		}
		if sticky && !inStore(next) && !o.Has(owner(fi)) {
			return "", nil, unsafe(next, "is owned by uid %d, who is not %s, in a directory anyone may add to", owner(fi), o)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			links++
			if links > maxLinks {
				return "", nil, fmt.Errorf("check %s: more than %d symbolic links", path, maxLinks)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", nil, fmt.Errorf("check %s: %w", path, err)
			}
			// The link itself needs no judging: only whoever may write
			// its directory (already judged) can replace it.
			if filepath.IsAbs(target) {
				cur = "/"
			}
			todo = append(split(target), todo...)
			if cur == "/" {
				fi, _ = os.Lstat(cur)
				sticky = fi != nil && fi.Mode()&fs.ModeSticky != 0 && fi.Mode().Perm()&0o022 != 0
			}
			continue
		}
		last := len(todo) == 0
		if !last && !fi.IsDir() {
			return "", nil, fmt.Errorf("check %s: %s is not a directory", path, next)
		}
		if err := o.judge(next, fi, last, inStore(next), unsafe); err != nil {
			return "", nil, err
		}
		cur = next
		sticky = !last && fi.Mode()&fs.ModeSticky != 0 && fi.Mode().Perm()&0o022 != 0
	}
	// The walk may end on a directory reached by "..", judged so far only
	// as a directory on the way: judge it as the file.
	if fi, err = os.Lstat(cur); err != nil {
		return "", nil, fmt.Errorf("check %s: %w", path, err)
	}
	if err := o.judge(cur, fi, true, inStore(cur), unsafe); err != nil {
		return "", nil, err
	}
	return cur, fi, nil
}

// judge applies the rule to one real location. last is the file (or the
// directory judged as a whole): it may not be writable by others even
// when sticky.
func (o Owners) judge(at string, fi fs.FileInfo, last, store bool, unsafe func(string, string, ...any) error) error {
	if store {
		return nil
	}
	// A test's sandbox / (testonly.go) only as a directory on the way.
	if uid := owner(fi); !o.Has(uid) && (last || !sandboxRootTrusted(at, uid)) {
		return unsafe(at, "is owned by uid %d, who is not %s", uid, o)
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 || (!last && fi.IsDir() && fi.Mode()&fs.ModeSticky != 0) {
		return nil
	}
	who := "its group"
	if perm&0o002 != 0 {
		who = "everyone"
	}
	return unsafe(at, "is writable by %s (mode %04o)", who, fileMode(fi))
}

// inStore reports whether the real path p lies inside the Nix store.
func inStore(p string) bool {
	rel, err := filepath.Rel(storeDir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}

func split(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// owner is the uid that owns fi; an impossible uid when the platform
// does not say, so that nothing is trusted by accident.
func owner(fi fs.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0)
}

// fileMode is the permission and sticky bits as chmod writes them.
func fileMode(fi fs.FileInfo) uint32 {
	m := uint32(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}

// TooLargeError is a file [Owners.ReadFile] refused for its size.
type TooLargeError struct{ Max int }

func (e *TooLargeError) Error() string { return fmt.Sprintf("larger than %d bytes", e.Max) }

// IsUnsafe reports whether err is, or wraps, an [*UnsafeError].
func IsUnsafe(err error) bool {
	var ue *UnsafeError
	return errors.As(err, &ue)
}
