//go:build !boxmaker_testnet

package netpolicy

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func TestCheckClasses(t *testing.T) {
	refused := []struct{ addr, want string }{
		{"0.0.0.0", "this network"},
		{"0.1.2.3", "this network"},
		{"10.0.0.1", "RFC 1918"},
		{"10.255.255.255", "RFC 1918"},
		{"100.64.0.1", "shared address space"},
		{"100.127.255.254", "shared address space"},
		{"127.0.0.1", "loopback"},
		{"127.8.9.10", "loopback"},
		{"169.254.169.254", "link-local"},
		{"172.16.0.1", "RFC 1918"},
		{"172.31.255.255", "RFC 1918"},
		{"192.0.0.9", "IETF protocol assignments"},
		{"192.0.0.171", "IETF protocol assignments"},
		{"192.0.2.1", "TEST-NET-1"},
		{"192.31.196.1", "AS112-v4"},
		{"192.52.193.1", "multicast tunneling"},
		{"192.88.99.1", "6to4 relay"},
		{"192.168.1.1", "RFC 1918"},
		{"192.175.48.1", "AS112"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.51.100.7", "TEST-NET-2"},
		{"203.0.113.7", "TEST-NET-3"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.254", "reserved"},
		{"255.255.255.255", "limited broadcast"},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"::a00:1", "IPv4-compatible"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"::8.8.8.8", "IPv4-compatible"},
		{"::ffff:127.0.0.1", "IPv4-mapped"},
		{"::ffff:10.0.0.1", "IPv4-mapped"},
		{"::ffff:8.8.8.8", "IPv4-mapped"},
		{"::ffff:0:10.0.0.1", "IPv4-translated"},
		{"64:ff9b::a00:1", "NAT64"},
		{"64:ff9b::7f00:1", "NAT64"},
		{"64:ff9b::808:808", "NAT64"},
		{"64:ff9b:1::a00:1", "local-use IPv4/IPv6 translation"},
		{"100::1", "discard-only"},
		{"100:0:0:1::1", "dummy"},
		{"2001::a00:1", "Teredo"},
		{"2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo"},
		{"2001:1::1", "PCP anycast"},
		{"2001:1::2", "TURN anycast"},
		{"2001:1::3", "DNS-SD"},
		{"2001:1::4", "IETF protocol assignments"},
		{"2001:3::1", "multicast tunneling"},
		{"2001:2::1", "benchmarking"},
		{"2001:4:112::1", "AS112-v6"},
		{"2001:10::1", "ORCHID"},
		{"2001:20::1", "ORCHIDv2"},
		{"2001:30::1", "drone remote ID"},
		{"2001:1ff::1", "IETF protocol assignments"},
		{"2001:db8::1", "documentation"},
		{"2002:a00:1::1", "6to4"},
		{"2002:7f00:1::", "6to4"},
		{"2620:4f:8000::1", "AS112"},
		{"3fff::1", "documentation"},
		{"5f00::1", "segment routing"},
		{"fc00::1", "unique local"},
		{"fd7a:115c:a1e0::1", "unique local"}, // the tailnet's IPv6 range
		{"fe80::1", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast"},
		{"4000::1", "outside 2000::/3"},
		{"1::1", "outside 2000::/3"},
		{"e000::1", "outside 2000::/3"},
		{"fe80::1%eth0", "zone"},
	}
	for _, tt := range refused {
		a := netip.MustParseAddr(tt.addr)
		err := Check(a)
		if err == nil || !errors.Is(err, ErrNotPublic) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%s) = %v, want a refusal naming %q", tt.addr, err, tt.want)
		}
	}
	if err := Check(netip.Addr{}); !errors.Is(err, ErrNotPublic) {
		t.Errorf("Check(zero) = %v, want a refusal", err)
	}
	for _, s := range []string{"1.1.1.1", "8.8.8.8", "93.184.215.14", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "192.0.1.255", "192.0.3.0", "198.17.255.255", "198.20.0.0", "223.255.255.255", "11.0.0.1", "2606:4700:4700::1111", "2a00:1450:4001::1", "2001:200::1", "2003::1", "2620:4f:7fff::1"} {
		if err := Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("Check(%s) = %v, want nil", s, err)
		}
	}
}

func TestTables(t *testing.T) {
	for _, tab := range [][]Block{IPv4, IPv6} {
		for _, bl := range tab {
			if bl.Prefix != bl.Prefix.Masked() || bl.Name == "" || !strings.HasPrefix(bl.Ref, "RFC ") {
				t.Errorf("block %v: not masked, or missing its name or RFC", bl)
			}
		}
	}
	for _, bl := range IPv4 {
		if !bl.Prefix.Addr().Is4() {
			t.Errorf("IPv4 table holds %s", bl.Prefix)
		}
	}
	for _, bl := range IPv6 {
		if !bl.Prefix.Addr().Is6() {
			t.Errorf("IPv6 table holds %s", bl.Prefix)
		}
	}
}

// v4Refused is the oracle for IPv4, written independently of the table:
// ranges as numbers, from the IANA registry read afresh.
func v4Refused(a [4]byte) bool {
	x := binary.BigEndian.Uint32(a[:])
	in := func(s string, bits int) bool {
		p := netip.MustParseAddr(s).As4()
		base := binary.BigEndian.Uint32(p[:])
		return x>>(32-bits) == base>>(32-bits)
	}
	return a[0] == 0 || a[0] == 10 || a[0] == 127 || a[0] >= 224 ||
		in("100.64.0.0", 10) || in("169.254.0.0", 16) || in("172.16.0.0", 12) ||
		in("192.0.0.0", 24) || in("192.0.2.0", 24) || in("192.31.196.0", 24) ||
		in("192.52.193.0", 24) || in("192.88.99.0", 24) || in("192.168.0.0", 16) ||
		in("192.175.48.0", 24) || in("198.18.0.0", 15) || in("198.51.100.0", 24) ||
		in("203.0.113.0", 24)
}

// TestOracle checks Check against the oracle on random and boundary
// addresses, against netip's own classification (anything netip calls
// loopback, private, link-local, multicast or unspecified is refused),
// and checks that every IPv6 form embedding an IPv4 address is refused
// whatever the embedded address is.
func TestOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var addrs []netip.Addr
	for _, tab := range [][]Block{IPv4, IPv6} {
		for _, bl := range tab {
			first := bl.Prefix.Addr()
			addrs = append(addrs, first, first.Prev(), lastOf(bl.Prefix), lastOf(bl.Prefix).Next())
		}
	}
	for range 40000 {
		var v4 [4]byte
		binary.BigEndian.PutUint32(v4[:], r.Uint32())
		addrs = append(addrs, netip.AddrFrom4(v4))
		var v6 [16]byte
		binary.BigEndian.PutUint64(v6[:8], r.Uint64())
		binary.BigEndian.PutUint64(v6[8:], r.Uint64())
		if r.IntN(2) == 0 {
			v6[0] = 0x20 | v6[0]&0x1f // inside 2000::/3
		}
		addrs = append(addrs, netip.AddrFrom16(v6))
		embeds := [][16]byte{
			netip.AddrFrom4(v4).As16(),                                                            // ::ffff:a.b.c.d
			{12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]},                                          // ::a.b.c.d
			{0x00, 0x64, 0xff, 0x9b, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]},                  // NAT64
			{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]},      // local NAT64
			{0x20, 0x02, v4[0], v4[1], v4[2], v4[3], 15: 1},                                       // 6to4
			{0x20, 0x01, 12: ^v4[0], 13: ^v4[1], 14: ^v4[2], 15: ^v4[3]},                          // Teredo client
			{0x20, 0x01, 0x00, 0x00, v4[0], v4[1], v4[2], v4[3], 12: v4[0], 13: v4[1], 15: v4[3]}, // Teredo server
		}
		for _, e := range embeds {
			a := netip.AddrFrom16(e)
			if Check(a) == nil {
				t.Fatalf("Check(%s) = nil for an address embedding %s", a, netip.AddrFrom4(v4))
			}
		}
	}
	for _, a := range addrs {
		if !a.IsValid() {
			continue
		}
		err := Check(a)
		if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsMulticast() || a.IsInterfaceLocalMulticast() || a.IsUnspecified() || a.Is4In6() {
			if err == nil {
				t.Fatalf("Check(%s) = nil; netip says it is not public", a)
			}
		}
		var want bool
		if a.Is4() {
			want = v4Refused(a.As4())
		} else {
			want = !GlobalUnicast.Contains(a) || v6RefusedInGlobal(a)
		}
		if (err != nil) != want {
			t.Fatalf("Check(%s) = %v; oracle says refused=%v", a, err, want)
		}
	}
}

// v6RefusedInGlobal is the oracle inside 2000::/3: the registry entries
// there, as leading 16-bit groups.
func v6RefusedInGlobal(a netip.Addr) bool {
	s := a.As16()
	g0 := uint16(s[0])<<8 | uint16(s[1])
	g1 := uint16(s[2])<<8 | uint16(s[3])
	g2 := uint16(s[4])<<8 | uint16(s[5])
	switch {
	case g0 == 0x2001 && g1 < 0x200: // 2001::/23
		return true
	case g0 == 0x2001 && g1 == 0x0db8, g0 == 0x2002:
		return true
	case g0 == 0x2620 && g1 == 0x004f && g2 == 0x8000:
		return true
	case g0 == 0x3fff && g1 < 0x1000: // 3fff::/20
		return true
	}
	return false
}

func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func BenchmarkCheck(b *testing.B) {
	addrs := []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("2606:4700:4700::1111"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("64:ff9b::a00:1")}
	for i := 0; b.Loop(); i++ {
		_ = Check(addrs[i%len(addrs)])
	}
}
