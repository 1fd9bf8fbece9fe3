//go:build boxmaker_testnet

package netpolicy

import "net/netip"

// relaxed is true only in builds tagged boxmaker_testnet, which exist so
// that a real-container test can reach a listener it controls on the
// host's loopback or a test network (RFC 1918 or ULA). Release builds
// never set the tag: cmd/*/tags.txt and the Makefile are checked for it
// by this package's tests, and the egress proxy logs the relaxation on
// start.
const relaxed = true

var relaxedBlocks = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("fc00::/7"),
}

func relaxable(a netip.Addr) bool {
	for _, p := range relaxedBlocks {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
