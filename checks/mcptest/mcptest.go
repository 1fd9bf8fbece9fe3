// Package mcptest holds what the MCP tests share over real Podman: the
// image of the small test server (checks/mcptest/server, built with the
// official Go SDK), and the image of the third-party servers from the npm
// registry (images/mcp-test-image).
//
// Invariant: the image holds the server, statically linked, at
// [ServerPath], /etc/passwd and /etc/group with nobody, and an empty /tmp
// (mode 1777: Podman gives the container's /tmp tmpfs the image's mode);
// nothing else (no shell), so that a test of what a server can reach sees
// only what the runner gave it.
package mcptest

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// ServerPath is where the test server is in its image.
const ServerPath = "/srv/server"

var (
	mu  sync.Mutex
	ids = map[*podmantest.Service]string{}
)

// ServerEnv names a test server built beforehand, for a test binary run
// where there is no Go toolchain (the VM guest: checks/vm builds it on
// the host and copies it in).
const ServerEnv = "BOXMAKER_MCP_TEST_SERVER"

// BuildServer builds the test server, static, into dir and returns its
// path; with [ServerEnv] set, it returns that path instead.
func BuildServer(t testing.TB, dir string) string {
	t.Helper()
	if p := os.Getenv(ServerEnv); p != "" {
		return p
	}
	bin := filepath.Join(dir, "mcp-test-server")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "wntrmute.dev/boxmaker/checks/mcptest/server")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build the MCP test server: %s", out)
	return bin
}

// ServerImage imports, once per service, the test server's image and
// returns its ID.
func ServerImage(t testing.TB, svc *podmantest.Service) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if id, ok := ids[svc]; ok {
		return id
	}
	body, err := os.ReadFile(BuildServer(t, t.TempDir()))
	require.NoError(t, err)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, d := range []string{"srv/", "etc/"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755})
	}
	// Podman gives the container's /tmp tmpfs the image's /tmp mode.
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777})
	file := func(name string, mode int64, data []byte) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))})
		tw.Write(data)
	}
	file("srv/server", 0o755, body)
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"))
	file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	require.NoError(t, tw.Close())
	id, err := svc.Import(b.Bytes(), "localhost/boxmaker-mcp-test:test")
	require.NoError(t, err)
	ids[svc] = id
	return id
}

// The third-party servers in the npm image (images/mcp-test-image).
var (
	EverythingCommand = []string{"/usr/bin/node", "/opt/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"}
	FilesystemCommand = []string{"/usr/bin/node", "/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"}
)

var (
	npmMu  sync.Mutex
	npmIDs = map[*podmantest.Service]string{}
)

// NPMImage builds (images/mcp-test-image: the machine's Node and the
// npm registry's @modelcontextprotocol/server-everything and
// server-filesystem, cached under ~/.cache/boxmaker/mcp) and imports,
// once per service, the third-party servers' image, and returns its ID.
// Without node and npm the test skips, or fails when CI is set.
func NPMImage(t testing.TB, svc *podmantest.Service) string {
	t.Helper()
	npmMu.Lock()
	defer npmMu.Unlock()
	if id, ok := npmIDs[svc]; ok {
		return id
	}
	root, err := podmantest.RepoRoot()
	require.NoError(t, err)
	tarPath := filepath.Join(t.TempDir(), "mcp-npm.tar")
	cmd := exec.Command(filepath.Join(root, "images", "mcp-test-image"), tarPath)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 && os.Getenv("CI") == "" {
		t.Skipf("did not run: %s", bytes.TrimSpace(out))
	}
	require.NoError(t, err, "images/mcp-test-image: %s", out)
	body, err := os.ReadFile(tarPath)
	require.NoError(t, err)
	id, err := svc.Import(body, "localhost/boxmaker-mcp-npm:test")
	require.NoError(t, err)
	npmIDs[svc] = id
	return id
}
