package brokerd

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Runner is the [runner] table of brokerd.toml: where Podman is, which
// image tool containers run, and their limits. Zero limits take the
// defaults below.
type Runner struct {
	// PodmanSocket is Podman's API service: a Unix socket path, or a
	// unix:// URL.
	PodmanSocket string `toml:"podman_socket"`
	// ToolImage is the tool image by ID, "sha256:<64 hex>".
	ToolImage string `toml:"tool_image"`

	MemoryMB      int64 `toml:"memory_mb"`       // per container, swap included
	Pids          int64 `toml:"pids"`            // processes and threads per container
	TmpfsMB       int64 `toml:"tmpfs_mb"`        // size of the container's /tmp
	StdoutCap     int   `toml:"stdout_cap"`      // bytes of stdout kept; more stops the tool
	StderrCap     int   `toml:"stderr_cap"`      // bytes of stderr kept; more stops the tool
	ShellTimeoutS int   `toml:"shell_timeout_s"` // shell's time limit
	TimeoutS      int   `toml:"timeout_s"`       // every other tool's time limit
}

// Defaults. The time limits stay under loopd's 120 s broker deadline,
// with room for creating and removing the containers (see the runner's callBudget).
const (
	DefaultMemoryMB      = 512
	DefaultPids          = 128
	DefaultTmpfsMB       = 64
	DefaultStdoutCap     = 1 << 20
	DefaultStderrCap     = 64 << 10
	DefaultShellTimeoutS = 75
	DefaultTimeoutS      = 60
	MaxTimeoutS          = 75
)

var imageID = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Check validates the table and fills in the defaults.
func (c Runner) Check() (Runner, error) {
	if c.PodmanSocket == "" {
		return Runner{}, errors.New("podman_socket is missing")
	}
	if _, err := socketURL(c.PodmanSocket); err != nil {
		return Runner{}, err
	}
	if !imageID.MatchString(c.ToolImage) {
		return Runner{}, fmt.Errorf("tool_image %q must be an image ID, \"sha256:\" and 64 lowercase hex digits (a name or tag could be re-pointed)", c.ToolImage)
	}
	for _, f := range []struct {
		name     string
		v        *int64
		def, max int64
	}{
		{"memory_mb", &c.MemoryMB, DefaultMemoryMB, 1 << 20},
		{"pids", &c.Pids, DefaultPids, 1 << 16},
		{"tmpfs_mb", &c.TmpfsMB, DefaultTmpfsMB, 1 << 16},
	} {
		if err := limit(f.name, f.v, f.def, f.max); err != nil {
			return Runner{}, err
		}
	}
	for _, f := range []struct {
		name     string
		v        *int
		def, max int
	}{
		{"stdout_cap", &c.StdoutCap, DefaultStdoutCap, 64 << 20},
		{"stderr_cap", &c.StderrCap, DefaultStderrCap, 64 << 20},
		{"shell_timeout_s", &c.ShellTimeoutS, DefaultShellTimeoutS, MaxTimeoutS},
		{"timeout_s", &c.TimeoutS, DefaultTimeoutS, MaxTimeoutS},
	} {
		v := int64(*f.v)
		if err := limit(f.name, &v, int64(f.def), int64(f.max)); err != nil {
			return Runner{}, err
		}
		*f.v = int(v)
	}
	return c, nil
}

func limit(name string, v *int64, def, max int64) error {
	switch {
	case *v == 0:
		*v = def
	case *v < 0 || *v > max:
		return fmt.Errorf("%s must be between 1 and %d (0 or absent: %d)", name, max, def)
	}
	return nil
}

// PodmanURL is podman_socket as the bindings' unix:// URL (Check has
// refused any other form).
func (c Runner) PodmanURL() string {
	u, _ := socketURL(c.PodmanSocket)
	return u
}

func socketURL(s string) (string, error) {
	p := strings.TrimPrefix(s, "unix://")
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("podman_socket %q must be an absolute socket path or a unix:// URL (Podman is reached on its local socket only)", s)
	}
	return "unix://" + p, nil
}
