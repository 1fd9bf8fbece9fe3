package runner

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Config is the [runner] table of brokerd.toml: where Podman is, which
// image tool containers run, and their limits. Zero limits take the
// defaults below.
type Config struct {
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

	// extraHosts are /etc/hosts lines ("name:address") for the egress
	// proxy's container. Only this package's tests set it, to give a
	// test name a private address without a DNS server; no config can.
	extraHosts []string
	// rootless is what the startup check found: a rootless service maps
	// the container's 65534 to brokerd's own user (keep-id), so a tool
	// reads and writes granted paths as that user, not as a subordinate
	// id that owns nothing; a rootful one gives each container a user
	// namespace of its own (userNS).
	rootless bool
	// seccompProfile is the path of the runner's seccomp profile
	// (toolProfile), which [New] writes; a spec without it is never
	// created.
	seccompProfile string
	// allowTestnetImage lets the startup check accept a tool image built
	// with the test-only boxmaker_testnet tag. Only this package's tests
	// set it; no config can.
	allowTestnetImage bool
}

// Defaults. The time limits stay under loopd's 120 s broker deadline,
// with room for creating and removing the containers (see callBudget).
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

// The time budget of one call: the tool's limit, then callMargin (the
// mount lock, connecting, the egress proxy, creating and verifying), then
// drainWait for the output after the tool exited, then the removal of
// the tool container and of the egress container, each bounded by
// removeWait, and egressDrain for the proxy's stream. With the largest
// limit it must fit callBudget: loopd stops waiting for brokerd after
// 120 s, and brokerd needs a few seconds to record and answer.
const (
	callBudget  = 115 * time.Second
	callMargin  = 10 * time.Second
	drainWait   = 5 * time.Second
	removeWait  = 10 * time.Second
	egressDrain = 2 * time.Second
)

// worstCase is how long a call with the time limit limit can take.
func worstCase(limit time.Duration) time.Duration {
	return limit + callMargin + drainWait + 2*removeWait + egressDrain
}

var imageID = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Check validates the table and fills in the defaults.
func (c Config) Check() (Config, error) {
	if c.PodmanSocket == "" {
		return Config{}, errors.New("podman_socket is missing")
	}
	if _, err := socketURL(c.PodmanSocket); err != nil {
		return Config{}, err
	}
	if !imageID.MatchString(c.ToolImage) {
		return Config{}, fmt.Errorf("tool_image %q must be an image ID, \"sha256:\" and 64 lowercase hex digits (a name or tag could be re-pointed)", c.ToolImage)
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
			return Config{}, err
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
			return Config{}, err
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

// socketURL turns a socket path or unix:// URL into the bindings' URL.
func socketURL(s string) (string, error) {
	p := strings.TrimPrefix(s, "unix://")
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("podman_socket %q must be an absolute socket path or a unix:// URL (Podman is reached on its local socket only)", s)
	}
	return "unix://" + p, nil
}

// timeout is the time limit of one call to tool.
func (c Config) timeout(tool string) time.Duration {
	if tool == toolset.Shell {
		return time.Duration(c.ShellTimeoutS) * time.Second
	}
	return time.Duration(c.TimeoutS) * time.Second
}
