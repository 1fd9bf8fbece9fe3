package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// The Podman API service `bxctl up` runs for the stack: brokerd creates
// every tool container through it. bxctl starts it only when brokerd.toml's
// [runner] names bxctl's own socket (which the first config does when
// `--tool-image` is given); a podman_socket of the owner's own (a systemd
// podman.socket, say) is left alone, and without [runner] brokerd runs
// no tools at all.

// podmanSocket is where bxctl's Podman service listens.
func podmanSocket(state string) string {
	return filepath.Join(socketDir(state, "podman"), "podman.sock")
}

// runnerTable is the [runner] table of brokerd's first config: bxctl's
// own Podman service and the tool image by ID; "" without an image.
func runnerTable(state, toolImage string) string {
	if toolImage == "" {
		return "\n# No [runner]: tool calls fail until one is added (deploy/brokerd.toml);\n# `bxctl up --tool-image sha256:ID` on first run writes one.\n"
	}
	return fmt.Sprintf("\n# bxctl up starts a Podman API service on this socket (logs/podman.log).\n[runner]\npodman_socket = %q\ntool_image = %q\n",
		podmanSocket(state), toolImage)
}

// podmanRole is the Podman service role when brokerd.toml asks for
// bxctl's own socket, else nil. podman is the binary ("" finds it on PATH).
func podmanRole(state, podman string) (*role, error) {
	var c struct {
		Runner *struct {
			PodmanSocket string `toml:"podman_socket"`
		} `toml:"runner"`
	}
	// Only this key is read here; brokerd checks the whole file strictly.
	if _, err := toml.DecodeFile(filepath.Join(state, "config", "brokerd.toml"), &c); err != nil {
		return nil, fmt.Errorf("read brokerd.toml: %v", err)
	}
	sock := podmanSocket(state)
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
