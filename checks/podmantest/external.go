package podmantest

import (
	"fmt"
	"os"
	"strings"
)

// SocketEnv names a running Podman API socket (a path or a unix:// URL)
// that [Require] uses instead of starting a service: a rootless user's
// own socket, as the VM test host runs the runner's tests against.
const SocketEnv = "BOXMAKER_PODMAN_SOCKET"

// External is the running service at sock, which this package did not
// start and never stops. The podman binary for the tests' own CLI calls
// is [Find]'s. Whether it is rootless is what the service reports.
func External(sock string) (*Service, error) {
	path := strings.TrimPrefix(sock, "unix://")
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%s=%q: want an absolute socket path or a unix:// URL", SocketEnv, sock)
	}
	bin, _, err := Find()
	if err != nil {
		return nil, err
	}
	// A directory of its own for the tool image tars ToolImage writes.
	dir, err := os.MkdirTemp("", "podmantest-external-")
	if err != nil {
		return nil, err
	}
	s := &Service{Socket: path, Binary: bin, dir: dir, env: os.Environ(), done: make(chan struct{})}
	if _, err := s.CLI(nil, "version"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the service at %s (%s): %v", path, SocketEnv, err)
	}
	if s.Rootless, err = s.rootless(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// rootless asks the service whether it runs rootless.
func (s *Service) rootless() (bool, error) {
	out, err := s.CLI(nil, "info", "--format", "{{.Host.Security.Rootless}}")
	if err != nil {
		return false, err
	}
	switch v := strings.TrimSpace(out); v {
	case "true", "false":
		return v == "true", nil
	default:
		return false, fmt.Errorf("podman info: rootless is %q", v)
	}
}

// AsOwner runs argv as the owner of the service's container files (the
// hosts file Podman bind-mounts, say): rootless, inside the service's
// user namespace (podman unshare), where this user is root and the
// container's root its subordinate id; rootful, as it is. It returns the
// command's stdout.
func (s *Service) AsOwner(stdin []byte, argv ...string) (string, error) {
	if s.Rootless {
		argv = append(append(append([]string{s.Binary}, s.globals...), "unshare"), argv...)
	}
	return s.run(stdin, strings.Join(argv, " "), argv...)
}
