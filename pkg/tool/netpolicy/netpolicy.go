// Package netpolicy is the one definition of an address a tool may reach:
// the egress proxy checks every address a granted name resolves to with
// [Check] before it connects, and brokerd may share it.
//
// Invariant: [Check] returns nil only for an address that is public
// unicast on the internet. It refuses, with an error naming the block and
// the document that reserves it:
//
//   - every entry of IANA's IPv4 Special-Purpose Address Registry
//     (https://www.iana.org/assignments/iana-ipv4-special-registry/),
//     whether or not IANA marks it globally reachable: "this network",
//     RFC 1918's private ranges, the shared address space 100.64.0.0/10
//     (the tailnet's), loopback, link-local, the IETF protocol block
//     192.0.0.0/24, the documentation ranges, AS112, AMT, the deprecated
//     6to4 relay anycast, benchmarking 198.18.0.0/15, 240.0.0.0/4 and the
//     limited broadcast address;
//   - IPv4 multicast 224.0.0.0/4 (RFC 5771);
//   - every IPv6 address outside 2000::/3, the only block IANA's IPv6
//     Address Space registry allocates as global unicast
//     (https://www.iana.org/assignments/ipv6-address-space/); that alone
//     refuses ::/128, ::1, ::/96 (IPv4-compatible), ::ffff:0:0/96
//     (IPv4-mapped), 64:ff9b::/96 and 64:ff9b:1::/48 (NAT64), 100::/64,
//     5f00::/16, fc00::/7 (ULA), fe80::/10, fec0::/10 and ff00::/8; the
//     table still names each, so a refusal says why;
//   - every entry of IANA's IPv6 Special-Purpose Address Registry
//     (https://www.iana.org/assignments/iana-ipv6-special-registry/) inside
//     2000::/3: 2001::/23 (which holds Teredo 2001::/32, whose addresses
//     embed an IPv4 address), 2001:db8::/32, 2002::/16 (6to4, which
//     embeds one too), 2620:4f:8000::/48 and 3fff::/20;
//   - an address with a zone, and the zero [netip.Addr].
//
// Refusal is by block, not by what an embedded IPv4 address would be:
// 6to4, Teredo, NAT64 and mapped forms are refused whole, so no encoding
// of a private IPv4 address inside an IPv6 one can pass.
//
// A build tagged boxmaker_testnet (see relaxed_testnet.go) also lets
// loopback and private ranges through, so a real-container test can reach
// a listener it controls; release builds never set that tag, and
// [Relaxed] says which build this is.
package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
)

// Block is one refused range and the document that reserves it.
type Block struct {
	Prefix netip.Prefix
	Name   string
	Ref    string // the RFC (or registry) that reserves it
}

func b(p, name, ref string) Block {
	return Block{netip.MustParsePrefix(p), name, ref}
}

// IPv4 lists the refused IPv4 blocks: the whole IPv4 Special-Purpose
// Address Registry (as of 2025) and multicast.
var IPv4 = []Block{
	b("0.0.0.0/8", "this network", "RFC 791, RFC 6890"),
	b("10.0.0.0/8", "private use", "RFC 1918"),
	b("100.64.0.0/10", "shared address space (carrier-grade NAT, the tailnet)", "RFC 6598"),
	b("127.0.0.0/8", "loopback", "RFC 1122"),
	b("169.254.0.0/16", "link-local", "RFC 3927"),
	b("172.16.0.0/12", "private use", "RFC 1918"),
	b("192.0.0.0/24", "IETF protocol assignments (DS-Lite, PCP and TURN anycast, NAT64 discovery)", "RFC 6890"),
	b("192.0.2.0/24", "documentation (TEST-NET-1)", "RFC 5737"),
	b("192.31.196.0/24", "AS112-v4", "RFC 7535"),
	b("192.52.193.0/24", "automatic multicast tunneling", "RFC 7450"),
	b("192.88.99.0/24", "deprecated 6to4 relay anycast", "RFC 7526"),
	b("192.168.0.0/16", "private use", "RFC 1918"),
	b("192.175.48.0/24", "direct delegation AS112 service", "RFC 7534"),
	b("198.18.0.0/15", "benchmarking", "RFC 2544"),
	b("198.51.100.0/24", "documentation (TEST-NET-2)", "RFC 5737"),
	b("203.0.113.0/24", "documentation (TEST-NET-3)", "RFC 5737"),
	b("224.0.0.0/4", "multicast", "RFC 5771"),
	b("240.0.0.0/4", "reserved", "RFC 1112"),
	b("255.255.255.255/32", "limited broadcast", "RFC 919, RFC 8190"),
}

// IPv6 lists the refused IPv6 blocks: the whole IPv6 Special-Purpose
// Address Registry (as of 2025) and the other non-global forms. Anything
// outside [GlobalUnicast] is refused even if no entry here names it.
var IPv6 = []Block{
	b("::/128", "unspecified", "RFC 4291"),
	b("::1/128", "loopback", "RFC 4291"),
	b("::/96", "IPv4-compatible (deprecated; embeds an IPv4 address)", "RFC 4291 section 2.5.5.1"),
	b("::ffff:0:0/96", "IPv4-mapped (embeds an IPv4 address)", "RFC 4291"),
	b("::ffff:0:0:0/96", "IPv4-translated (embeds an IPv4 address)", "RFC 2765"),
	b("64:ff9b::/96", "NAT64 well-known prefix (embeds an IPv4 address)", "RFC 6052"),
	b("64:ff9b:1::/48", "local-use IPv4/IPv6 translation", "RFC 8215"),
	b("100::/64", "discard-only", "RFC 6666"),
	b("100:0:0:1::/64", "dummy IPv6 prefix", "RFC 9780"),
	b("2001::/23", "IETF protocol assignments", "RFC 2928"),
	b("2001::/32", "Teredo (embeds an IPv4 address)", "RFC 4380, RFC 8190"),
	b("2001:1::1/128", "PCP anycast", "RFC 7723"),
	b("2001:1::2/128", "TURN anycast", "RFC 8155"),
	b("2001:1::3/128", "DNS-SD service registration protocol anycast", "RFC 9665"),
	b("2001:2::/48", "benchmarking", "RFC 5180"),
	b("2001:3::/32", "automatic multicast tunneling", "RFC 7450"),
	b("2001:4:112::/48", "AS112-v6", "RFC 7535"),
	b("2001:10::/28", "ORCHID (deprecated)", "RFC 4843"),
	b("2001:20::/28", "ORCHIDv2", "RFC 7343"),
	b("2001:30::/28", "drone remote ID protocol entity tags", "RFC 9374"),
	b("2001:db8::/32", "documentation", "RFC 3849"),
	b("2002::/16", "6to4 (embeds an IPv4 address)", "RFC 3056"),
	b("2620:4f:8000::/48", "direct delegation AS112 service", "RFC 7534"),
	b("3fff::/20", "documentation", "RFC 9637"),
	b("5f00::/16", "segment routing SIDs", "RFC 9602"),
	b("fc00::/7", "unique local", "RFC 4193"),
	b("fe80::/10", "link-local", "RFC 4291"),
	b("fec0::/10", "site-local (deprecated)", "RFC 3879"),
	b("ff00::/8", "multicast", "RFC 4291"),
}

// GlobalUnicast is the only IPv6 block IANA allocates for global unicast.
var GlobalUnicast = netip.MustParsePrefix("2000::/3")

// ErrNotPublic is wrapped by every refusal of [Check].
var ErrNotPublic = errors.New("not a public address")

// Check returns nil if a may be reached, and otherwise an error wrapping
// [ErrNotPublic] that names the block. See the package doc.
func Check(a netip.Addr) error {
	if !a.IsValid() {
		return fmt.Errorf("%w: no address", ErrNotPublic)
	}
	if a.Zone() != "" {
		return fmt.Errorf("%w: %s has a zone", ErrNotPublic, a)
	}
	if relaxed && relaxable(a) {
		return nil
	}
	table := IPv4
	if a.Is6() {
		table = IPv6
	}
	// The most specific block names the refusal best (Teredo, not the
	// IETF block that holds it).
	var hit *Block
	for i := range table {
		if table[i].Prefix.Contains(a) && (hit == nil || table[i].Prefix.Bits() > hit.Prefix.Bits()) {
			hit = &table[i]
		}
	}
	if hit != nil {
		return fmt.Errorf("%w: %s is in %s, %s (%s)", ErrNotPublic, a, hit.Prefix, hit.Name, hit.Ref)
	}
	if a.Is6() && !GlobalUnicast.Contains(a) {
		return fmt.Errorf("%w: %s is outside %s, the only global unicast block (IANA IPv6 address space)", ErrNotPublic, a, GlobalUnicast)
	}
	return nil
}

// Relaxed reports whether this build carries the test-only relaxation
// (build tag boxmaker_testnet). A release build reports false.
func Relaxed() bool { return relaxed }
