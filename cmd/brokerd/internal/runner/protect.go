package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrProtected refuses a mount that would reach brokerd's own files or
// sockets, or the host's kernel and runtime trees.
var ErrProtected = errors.New("the call would mount a path that holds or lies inside brokerd's own state, grants, config, sockets or secrets, any entry of the state directory (every role's state and config, sessions, memory, jobs), Podman's socket directory, the runtime directory, or /proc, /sys, /dev or /run, which are never mounted; see docs/runbook.md#mount-protected")

// alwaysProtected are never mounted, nor any directory that holds them:
// the kernel's views of the host and the runtime tree where sockets
// (Podman's among them) live. A Unix socket can be connected through a
// read-only mount.
var alwaysProtected = []string{"/proc", "/sys", "/dev", "/run"}

// protectedPaths resolves the paths no mount may hold or lie inside:
// alwaysProtected, extra (brokerd's state, grants, config, socket
// directories and secret files), the work directory, the Podman socket's
// directory, $XDG_RUNTIME_DIR and $CREDENTIALS_DIRECTORY. Each is kept
// both as given (cleaned) and with its links resolved, as far as it
// exists, because mount paths are compared after resolution.
func protectedPaths(cfg Config, work string, extra []string) ([]string, error) {
	sock := cfg.PodmanURL()
	list := slices.Concat(alwaysProtected, extra, []string{work, filepath.Dir(strings.TrimPrefix(sock, "unix://"))})
	for _, env := range []string{"XDG_RUNTIME_DIR", "CREDENTIALS_DIRECTORY"} {
		if v := os.Getenv(env); v != "" {
			list = append(list, v)
		}
	}
	var out []string
	for _, p := range list {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("runner: protected path %q is not absolute", p)
		}
		real, err := resolveExisting(filepath.Clean(p))
		if err != nil {
			return nil, fmt.Errorf("runner: protected path %s: %v", p, err)
		}
		out = append(out, filepath.Clean(p), real)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// resolveExisting resolves links in the longest existing prefix of p and
// appends the rest: a protected path that does not exist yet (a socket
// directory made later) is still compared by its real parent.
func resolveExisting(p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	switch {
	case err == nil:
		return real, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	case p == "/":
		return p, nil
	}
	parent, err := resolveExisting(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	return filepath.Join(parent, filepath.Base(p)), nil
}

// within reports whether p is q or lies under it (both clean, absolute).
func within(p, q string) bool {
	return p == q || q == "/" || strings.HasPrefix(p, q+"/")
}

// ProtectedHit returns the protected path that the path p (real,
// clean) holds or lies inside, or "".
func ProtectedHit(p string, protected []string) string {
	for _, q := range protected {
		if within(p, q) || within(q, p) {
			return q
		}
	}
	return ""
}
