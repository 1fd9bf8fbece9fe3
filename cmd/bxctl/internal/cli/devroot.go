package cli

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
// root, or when the role users can run what is in bin, it is bin.
// Otherwise a --bin the owner named is refused, and bxctl's own
// directory is copied, role by role, into DevRoot/bin (root's, 0755).
func roleBinaries(bin string, named bool, names []string, stdout io.Writer) (string, error) {
	if os.Geteuid() != 0 {
		return bin, nil
	}
	stop, ok := reachable(bin)
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(bin, n)); ok && err == nil && fi.Mode().Perm()&0o001 == 0 {
			stop, ok = filepath.Join(bin, n), false
		}
	}
	if ok {
		return bin, nil
	}
	if named {
		return "", fmt.Errorf("the role users cannot run the role binaries in %s (%s stops them); put them where they can, or leave --bin out and bxctl up copies them into %s; see docs/runbook.md#up-bin-unreachable", bin, stop, filepath.Join(DevRoot, "bin"))
	}
	dst := filepath.Join(DevRoot, "bin")
	if err := rootDir(DevRoot); err != nil {
		return "", err
	}
	if err := rootDir(dst); err != nil {
		return "", err
	}
	for _, n := range names {
		if err := copyBinary(filepath.Join(bin, n), filepath.Join(dst, n)); err != nil {
			return "", err
		}
	}
	fmt.Fprintf(stdout, "bxctl up: the role users cannot reach %s (%s stops them), so the roles run from copies in %s\n", bin, stop, dst)
	return dst, nil
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
// place, so a role never runs half a binary. A role that does not exist
// in the build (gatewayd before its config) is passed over.
func copyBinary(src, dst string) error {
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
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
