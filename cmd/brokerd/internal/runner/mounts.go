package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// checkMounts looks at each path a call would mount before Podman does.
// A bind mount follows symbolic links on the host, with the privileges of
// Podman's runtime, so a link planted in a granted directory (by an
// earlier shell call, say) would mount whatever it points to: a path with
// a link anywhere in it is refused. A missing path, or one of the wrong
// kind, is the call's own mistake, reported to the model like a tool's
// error (a non-empty problem); err is for what brokerd cannot check.
//
// A path that holds or lies inside a protected path (see protectedPaths)
// is refused with [ErrProtected], whether or not it exists: that is no
// mistake of the model's to retry but a grant that reaches too far.
func checkMounts(d policy.Decision, protected []string) (problem string, err error) {
	for _, m := range d.Mounts() {
		if q := ProtectedHit(m.Path.String(), protected); q != "" {
			return "", fail(ErrProtected, fmt.Sprintf("%s reaches %s", m.Path, q))
		}
	}
	for _, m := range d.Mounts() {
		p := m.Path.String()
		real, err := filepath.EvalSymlinks(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Sprintf("%s: no such file or directory", p), nil
		case err != nil:
			return fmt.Sprintf("%s: %v", p, errors.Unwrap(err)), nil
		case real != p:
			return fmt.Sprintf("%s: the path goes through a symbolic link, which is never mounted; name the real path", p), nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Sprintf("%s: %v", p, errors.Unwrap(err)), nil
		}
		wantDir := d.Tool() != toolset.ReadFile
		if _, mcp := d.MCP(); mcp {
			// An MCP grant's path is a file or a directory: it is
			// mounted as it is, and the server makes of it what it will.
			if fi.IsDir() || fi.Mode().IsRegular() {
				continue
			}
			return fmt.Sprintf("%s: not a directory or a regular file", p), nil
		}
		switch {
		case wantDir && !fi.IsDir():
			return fmt.Sprintf("%s: not a directory", p), nil
		case !wantDir && !fi.Mode().IsRegular():
			return fmt.Sprintf("%s: not a regular file", p), nil
		}
	}
	return "", nil
}
