package podmantest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var imageIDRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// Import imports a root filesystem tar stream as ref and returns the
// image's ID ("sha256:<64 hex>"), the only name brokerd accepts.
func (s *Service) Import(tarball []byte, ref string) (string, error) {
	out, err := s.CLI(tarball, "import", "-", ref)
	if err != nil {
		return "", err
	}
	out, err = s.CLI(nil, "image", "inspect", "--format", "{{.ID}}", ref)
	if err != nil {
		return "", err
	}
	id := "sha256:" + strings.TrimSpace(out)
	if !imageIDRE.MatchString(id) {
		return "", fmt.Errorf("image inspect %s: unexpected ID %q", ref, out)
	}
	return id, nil
}

var (
	toolOnce sync.Once
	toolID   string
	toolErr  error
)

// ToolImage builds the tool image with scripts/tool-image (the toolkit,
// a static busybox, the CA bundle; see docs/tool-image.md), imports it
// once per test binary and returns its ID. $BOXMAKER_TOOL_TAR names a
// tar built already, to import instead.
func (s *Service) ToolImage(t testing.TB) string {
	t.Helper()
	toolOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			toolErr = err
			return
		}
		tarPath := os.Getenv("BOXMAKER_TOOL_TAR")
		if tarPath == "" {
			tarPath = filepath.Join(s.dir, "tool-image.tar")
			cmd := exec.Command(filepath.Join(root, "scripts", "tool-image"), tarPath)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				toolErr = fmt.Errorf("scripts/tool-image: %v: %s", err, out)
				return
			}
		}
		b, err := os.ReadFile(tarPath)
		if err != nil {
			toolErr = err
			return
		}
		toolID, toolErr = s.Import(b, "localhost/boxmaker-tool:test")
	})
	if toolErr != nil {
		t.Fatalf("tool image: %v", toolErr)
	}
	return toolID
}
