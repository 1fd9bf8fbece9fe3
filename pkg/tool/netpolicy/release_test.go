//go:build !boxmaker_testnet

package netpolicy

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReleaseHasNoRelaxation holds in every build without the test tag:
// loopback and private addresses are refused, and nothing that builds a
// binary for release names the tag.
func TestReleaseHasNoRelaxation(t *testing.T) {
	if Relaxed() {
		t.Fatal("Relaxed() = true in a build without boxmaker_testnet")
	}
	for _, s := range []string{"127.0.0.1", "10.0.0.1", "192.168.0.1", "::1", "fd00::1"} {
		if Check(netip.MustParseAddr(s)) == nil {
			t.Errorf("Check(%s) = nil in a release build", s)
		}
	}
	files, err := filepath.Glob("../../../cmd/*/tags.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cmd/*/tags.txt found from here (%v): the check would pass vacuously", err)
	}
	files = append(files, "../../../Makefile")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "boxmaker_testnet") {
			t.Errorf("%s names the test-only tag boxmaker_testnet; release builds must never set it", f)
		}
	}
}
