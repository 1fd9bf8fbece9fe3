// Package mcptest holds what the MCP tests share: the image of the small
// test server (checks/mcptest/server, built with the official Go SDK) for
// runs over real Podman.
//
// Invariant: the image holds the server, statically linked, at
// [ServerPath], /etc/passwd and /etc/group with nobody, and an empty /tmp;
// nothing else (no shell), so that a test of what a server can reach sees
// only what the runner gave it.
package mcptest

import (
	"archive/tar"
	"bytes"
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

// BuildServer builds the test server, static, into dir and returns its
// path.
func BuildServer(t testing.TB, dir string) string {
	t.Helper()
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
	for _, d := range []string{"srv/", "etc/", "tmp/"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755})
	}
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
