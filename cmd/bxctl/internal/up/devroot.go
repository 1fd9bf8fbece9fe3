package up

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// DevRoot is where `bxctl up` run as root keeps what the role users must
// reach when the owner names no place: the state directory (DevRoot/state)
// and, when bxctl's own directory is out of their reach, copies of the
// role binaries (DevRoot/bin). A clone in root's home (0700, as on CI's
// machines) is out of their reach, and `make up` must still just work.
// A state directory or --bin the owner names is never moved: one the role
// users cannot reach is refused (layout-unreachable, up-bin-unreachable).
const DevRoot = "/var/lib/boxmaker-dev"

// reachable reports whether a user who is not the owner may pass every
// directory from dir up to / (o+x), and if not, the first that stops it.
func reachable(dir string) (string, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return d, false
		}
		if d == "/" {
			return "", true
		}
	}
}

// roleBinaries returns the directory the roles are run from. Not as
// root, it is bin. As root, bin is used in place only when the role users
// can run what is in it and nobody but root can change it (trusted);
// otherwise a --bin the owner named that the role users cannot reach is
// refused, and any other is copied, role by role, into dev/bin (root's,
// 0755; dev is DevRoot).
func roleBinaries(bin string, named bool, names []string, dev string, stdout io.Writer) (string, error) {
	if os.Geteuid() != 0 {
		return bin, nil
	}
	stop, ok := reachable(bin)
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(bin, n)); ok && err == nil && fi.Mode().Perm()&0o001 == 0 {
			stop, ok = filepath.Join(bin, n), false
		}
	}
	why := "the role users cannot reach"
	if ok {
		if stop, ok = trusted(bin, names, "/"); ok {
			return bin, nil
		}
		why = "someone other than root can change"
	} else if named {
		return "", fmt.Errorf("the role users cannot run the role binaries in %s (%s stops them); put them where they can, or leave --bin out and bxctl up copies them into %s; see docs/runbook.md#up-bin-unreachable", bin, stop, filepath.Join(dev, "bin"))
	}
	dst := filepath.Join(dev, "bin")
	if err := rootDir(dev); err != nil {
		return "", err
	}
	if err := rootDir(dst); err != nil {
		return "", err
	}
	for _, n := range names {
		if err := copyBinary(filepath.Join(bin, n), filepath.Join(dst, n)); err != nil {
			return "", fmt.Errorf("copy %s into %s: %w; see docs/runbook.md#up-bin-unreachable", n, dst, err)
		}
	}
	fmt.Fprintf(stdout, "bxctl up: %s %s (%s), so the roles run from copies in %s\n", why, bin, stop, dst)
	return dst, nil
}

// trusted reports whether nobody but root can change what runs from bin:
// bin (links resolved), each directory above it up to top, and each of
// the names in it that exists must be root's and writable by neither
// group nor others; above bin, a root-owned sticky directory (/tmp) is
// accepted too, bin itself never (a directory a user may write is one a
// user may fill with a missing role's binary). If not, it returns the
// first that fails.
func trusted(bin string, names []string, top string) (string, bool) {
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return bin, false
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return bin, false
	}
	rootOnly := func(p string, dir bool) bool {
		fi, err := os.Lstat(p)
		if err != nil {
			return false
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		kind := fi.Mode().IsRegular()
		if dir {
			kind = fi.IsDir()
		}
		return kind && st != nil && st.Uid == 0 && fi.Mode().Perm()&0o022 == 0
	}
	for _, n := range names {
		p := filepath.Join(real, n)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if !rootOnly(p, false) {
			return p, false
		}
	}
	// Above the binaries' own directory, a root-owned sticky directory
	// (/tmp) is as safe as a root-only one: its sticky bit keeps anyone
	// else from renaming or removing the root-owned entry below it.
	sticky := func(p string) bool {
		fi, err := os.Lstat(p)
		if err != nil {
			return false
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		return fi.IsDir() && st != nil && st.Uid == 0 && fi.Mode()&fs.ModeSticky != 0
	}
	for d := real; ; d = filepath.Dir(d) {
		if !rootOnly(d, true) && (d == real || !sticky(d)) {
			return d, false
		}
		if d == top || d == filepath.Dir(d) {
			return "", true
		}
	}
}

// rootDir makes dir (0755) or accepts it only as a directory of root's
// that nobody else may write, never through a link: what runs as every
// role comes from it.
func rootDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || st == nil || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s must be a directory of root's that nobody else may write (it is %s, mode %s); see docs/runbook.md#up-bin-unreachable", dir, fi.Mode().Type(), fi.Mode().Perm())
	}
	return os.Chmod(dir, 0o755)
}

// copyBinary copies src to dst (0755) through a new file renamed into
// place, so a role never runs half a binary. src must be a regular file,
// not reached through a link (its directory may be a user's, and root
// must not copy a file that user names into a world-readable binary). A
// role that does not exist in the build (gatewayd before its config) is
// passed over, and an older copy of it removed, so that it does not run.
func copyBinary(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	_, cerr := io.Copy(tmp, in)
	if err := errors.Join(cerr, tmp.Chmod(0o755), tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
