package up

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

// The Podman API service `bxctl up` runs for the stack: brokerd creates
// every tool container through it. bxctl starts it only when brokerd.toml's
// [runner] names bxctl's own socket (which the first config does when
// `--tool-image` is given: package layout); a podman_socket of the owner's own (a systemd
// podman.socket, say) is left alone, and without [runner] brokerd runs
// no tools at all.

// podmanRole is the Podman service role when brokerd.toml asks for
// bxctl's own socket, else nil. podman is the binary ("" finds it on PATH).
func podmanRole(state, podman string) (*role, error) {
	c, err := readBrokerd(state)
	if err != nil {
		return nil, err
	}
	sock := layout.PodmanRun.SocketIn(state)
	if c.Runner == nil || filepath.Clean(strings.TrimPrefix(c.Runner.PodmanSocket, "unix://")) != sock {
		return nil, nil
	}
	if podman == "" {
		var err error
		if podman, err = exec.LookPath("podman"); err != nil {
			return nil, fmt.Errorf("brokerd.toml names bxctl's Podman socket, but no podman is on PATH (install Podman 5, or pass --podman PATH); see docs/runbook.md#podman-unavailable")
		}
	}
	os.Remove(sock) // a stale socket from a killed run
	return &role{name: "podman", socket: sock, argv: []string{podman, "system", "service", "--time=0", "unix://" + sock}}, nil
}

// hasRunner reports whether brokerd.toml has a [runner]: brokerd then
// drives Podman, which as root is rootful.
func hasRunner(state string) bool {
	c, err := readBrokerd(state)
	return err == nil && c.Runner != nil
}

// readBrokerd reads brokerd.toml with brokerd's own loader (package
// roleconf/brokerd), so bxctl up starts Podman for no config brokerd
// would refuse.
func readBrokerd(state string) (brokerd.Config, error) {
	path := layout.ConfigPath(state, layout.Brokerd)
	data, err := os.ReadFile(path)
	if err != nil {
		return brokerd.Config{}, fmt.Errorf("read brokerd.toml: %v", err)
	}
	c, _, err := brokerd.Parse(data, path, state)
	return c, err
}

// podmanReady gives Podman's socket the table's group and mode once the
// service made it (root:brokerd 0660, package layout): Podman checks no
// peer, so the file's permissions are what keeps other roles out.
// layout.GiveSocket reaches it through descriptors, never a link.
func podmanReady(state string, u layout.Users) error {
	if err := layout.GiveSocket(state, &layout.PodmanRun, u); err != nil {
		return fmt.Errorf("podman socket: %w", err)
	}
	return nil
}
