package chatapi

import (
	"os"
	"strings"
	"testing"
)

// TestToolkitTrustsThisCA: the toolkit's test-only CA (built into
// boxmaker_testnet toolkits only) is this package's CA, so a
// real-container consult verifies TLS against the fake end to end.
func TestToolkitTrustsThisCA(t *testing.T) {
	b, err := os.ReadFile("../../../cmd/toolkit/internal/tools/testca_testnet.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), CA) || !strings.HasPrefix(string(b), "//go:build boxmaker_testnet\n") {
		t.Error("testca_testnet.go does not hold this CA, or is not limited to boxmaker_testnet builds")
	}
	if _, err := Leaf("api.test", "127.0.0.1"); err != nil {
		t.Error(err)
	}
}
