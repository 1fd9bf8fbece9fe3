package runner

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// TestTestOnlyNetworkOnlyInTests: no product file calls TestOnlyNetwork.
func TestTestOnlyNetworkOnlyInTests(t *testing.T) {
	root, err := podmantest.RepoRoot()
	if err != nil && os.Getenv(podmantest.SocketEnv) != "" {
		// A test binary copied into the VM test host has no source tree
		// to read; the host's gate runs this check.
		t.Skip("no source tree here (a copied test binary): the host's gate runs this check")
	}
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != root {
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, "testonly.go") {
			return nil
		}
		if b, _ := os.ReadFile(p); strings.Contains(string(b), "TestOnlyNetwork(") {
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Errorf("product files call runner.TestOnlyNetwork: %v", found)
	}
}
