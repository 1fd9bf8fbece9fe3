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

	"github.com/stretchr/testify/require"
)

var imageIDRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// Import imports a root filesystem tar stream as ref and returns the
// image's ID ("sha256:<64 hex>"), the only name brokerd accepts.
func (s *Service) Import(tarball []byte, ref string) (string, error) {
	if _, err := s.CLI(tarball, "import", "-", ref); err != nil {
		return "", err
	}
	out, err := s.CLI(nil, "image", "inspect", "--format", "{{.ID}}", ref)
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
	toolMu  sync.Mutex
	toolIDs = map[string]string{} // by service directory and tags
)

// ToolImage builds the tool image with images/tool-image (the toolkit,
// a static busybox, the CA bundle; see docs/tool-image.md), imports it
// once per service and returns its ID. $BOXMAKER_TOOL_TAR names a tar
// built already, to import instead (and then no source tree is needed).
func (s *Service) ToolImage(t testing.TB) string {
	t.Helper()
	return s.toolImage(t, "")
}

// TestnetToolImage is the tool image built with the boxmaker_testnet tag,
// whose egress proxy may also reach loopback and private test networks,
// so that a test can serve the proxy's allowed side itself. Release
// builds never carry the tag (pkg/tool/netpolicy). $BOXMAKER_TESTNET_TOOL_TAR
// names a tar built already with TOOLKIT_TAGS=boxmaker_testnet.
func (s *Service) TestnetToolImage(t testing.TB) string {
	t.Helper()
	return s.toolImage(t, "boxmaker_testnet")
}

func (s *Service) toolImage(t testing.TB, tags string) string {
	t.Helper()
	toolMu.Lock()
	defer toolMu.Unlock()
	key := s.dir + "|" + tags
	if id, ok := toolIDs[key]; ok {
		return id
	}
	id, err := func() (string, error) {
		tarPath := os.Getenv("BOXMAKER_TOOL_TAR")
		if tags != "" {
			tarPath = os.Getenv("BOXMAKER_TESTNET_TOOL_TAR")
		}
		if tarPath == "" {
			root, err := RepoRoot()
			if err != nil {
				return "", err
			}
			tarPath = filepath.Join(s.dir, "tool-image"+tags+".tar")
			cmd := exec.Command(filepath.Join(root, "images", "tool-image"), tarPath)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "TOOLKIT_TAGS="+tags)
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("images/tool-image: %v: %s", err, out)
			}
		}
		b, err := os.ReadFile(tarPath)
		if err != nil {
			return "", err
		}
		ref := "localhost/boxmaker-tool:test"
		if tags != "" {
			ref = "localhost/boxmaker-tool:" + strings.ReplaceAll(tags, ",", "-")
		}
		return s.Import(b, ref)
	}()
	require.NoError(t, err, "tool image")
	toolIDs[key] = id
	return id
}
