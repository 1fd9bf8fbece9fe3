//go:build !boxmaker_testnet

package netpolicy

import "net/netip"

// relaxed is false in every build without the boxmaker_testnet tag: the
// release policy has no exceptions.
const relaxed = false

func relaxable(netip.Addr) bool { return false }
