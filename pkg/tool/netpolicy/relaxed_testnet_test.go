//go:build boxmaker_testnet

package netpolicy

import (
	"net/netip"
	"testing"
)

func TestRelaxation(t *testing.T) {
	if !Relaxed() {
		t.Fatal("Relaxed() = false under boxmaker_testnet")
	}
	for _, s := range []string{"127.0.0.1", "10.88.0.1", "192.168.0.1", "::1", "fd00::1"} {
		if err := Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("Check(%s) = %v under the relaxation", s, err)
		}
	}
	// The relaxation covers the test's own networks, not the tailnet or
	// embedded forms.
	for _, s := range []string{"100.64.0.1", "::ffff:127.0.0.1", "64:ff9b::a00:1", "169.254.169.254"} {
		if Check(netip.MustParseAddr(s)) == nil {
			t.Errorf("Check(%s) = nil under the relaxation", s)
		}
	}
}
