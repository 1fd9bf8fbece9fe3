package install

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
)

// pathOK is the alphabet of a path install writes into unit text: no
// whitespace or control character (a newline would start a directive of
// its own), no "%" (a systemd specifier), no quote, backslash or ";"
// (systemd's command-line syntax).
func pathOK(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+", r)
}

// checkPaths refuses a path flag that is not absolute and clean, or
// holds a character outside [pathOK]'s: each goes into the units' text
// (ExecStart=, RootDirectory=, LoadCredentialEncrypted=, the binds).
func checkPaths(o Options) []error {
	var errs []error
	for _, f := range []struct{ flag, v string }{
		{"--state", o.State}, {"--podman", o.Podman}, {"--unit-dir", o.UnitDir},
		{"--image-root", o.ImageRoot}, {"--credential-dir", o.CredDir},
	} {
		switch {
		case !filepath.IsAbs(f.v) || filepath.Clean(f.v) != f.v:
			errs = append(errs, Refusal{fmt.Sprintf("%s %q is not an absolute, clean path", f.flag, f.v), "see docs/runbook.md#install-path"})
		case strings.IndexFunc(f.v, func(r rune) bool { return !pathOK(r) }) >= 0:
			errs = append(errs, Refusal{fmt.Sprintf("%s %q holds a character other than letters, digits and /._-+ (it goes into the units' text, where whitespace, %% and quotes mean something)", f.flag, f.v), "see docs/runbook.md#install-path"})
		}
	}
	return errs
}

// Narrowest prefixes accepted in --mattermost-net and --honcho-net:
// an IPv4 prefix shorter than /8 or an IPv6 one shorter than /32 (an
// ISP's whole allocation) is the Internet, not a service's address.
const (
	minBits4 = 8
	minBits6 = 32
)

// checkNet refuses an --*-net entry that is not an address or a prefix,
// the unspecified address, or a prefix wider than [minBits4]/[minBits6]:
// IPAddressAllow= is the role's only network boundary.
func checkNet(flag, a string) error {
	p, err := netip.ParsePrefix(a)
	if err != nil {
		addr, aerr := netip.ParseAddr(a)
		if aerr != nil || addr.Zone() != "" {
			return Refusal{fmt.Sprintf("%s %q is not an address or a prefix", flag, a), "see docs/runbook.md#install-network"}
		}
		p = netip.PrefixFrom(addr, addr.BitLen())
	}
	addr, bits := p.Addr(), p.Bits()
	if addr.Is4In6() {
		addr, bits = addr.Unmap(), bits-96
	}
	switch {
	case addr.IsUnspecified() && bits == addr.BitLen():
		return Refusal{fmt.Sprintf("%s %q is the unspecified address, no host's", flag, a), "see docs/runbook.md#install-network-wide"}
	case addr.Is4() && bits < minBits4, !addr.Is4() && bits < minBits6:
		return Refusal{fmt.Sprintf("%s %q allows too much: a prefix must be at least /%d (IPv4) or /%d (IPv6); name the service's address", flag, a, minBits4, minBits6), "see docs/runbook.md#install-network-wide"}
	}
	return nil
}
