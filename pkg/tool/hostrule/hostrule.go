// Package hostrule is the one definition of a host name that a grant may
// allow and a tool may reach: brokerd checks grants and http_fetch
// requests with it, and the toolkit's egress proxy checks every name it is
// asked to connect to with the same rules.
//
// Invariants:
//   - A [Name] holds only a DNS host name in canonical form: lowercase
//     ASCII letters, digits, '-' and '.', two or more labels of 1 to 63
//     characters, none starting or ending with '-', at most 253 characters,
//     no trailing dot, and a last label that starts with a letter. That
//     last rule is what keeps every IP literal out: 127.0.0.1, 127.1,
//     0x7f.1, 2130706433, ::1 and [::1] all fail it or the character set,
//     and [ParseName] also refuses anything [netip.ParseAddr] accepts.
//   - There are no wildcards: a grant names each host it allows, and
//     [Allowed] matches exactly (a grant for example.com does not allow
//     www.example.com). A grant allows a name, not what it resolves to;
//     the proxy refuses names that resolve to non-public addresses.
//   - Single-label names (localhost, a tailnet machine name) are refused:
//     they resolve through search domains to the owner's own network,
//     which no tool may reach.
//
// Grant files must already be lowercase ([ParseName]); names taken from a
// request are case-insensitive in ASCII only ([ParseHost]), so a
// non-ASCII character can never fold into an allowed name.
package hostrule

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// MaxLen is the longest host name DNS can carry in text form.
const MaxLen = 253

// Name is a valid host name in canonical (lowercase) form. The zero value
// is not a name and matches nothing.
type Name struct {
	s string
}

// String returns the name.
func (n Name) String() string { return n.s }

// IsZero reports whether n is the zero value (no name).
func (n Name) IsZero() bool { return n.s == "" }

// MarshalText writes the name; the zero value is an error.
func (n Name) MarshalText() ([]byte, error) {
	if n.s == "" {
		return nil, errors.New("marshal host name: empty")
	}
	return []byte(n.s), nil
}

// UnmarshalText parses a name in canonical form, as [ParseName].
func (n *Name) UnmarshalText(b []byte) error {
	v, err := ParseName(string(b))
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// ParseName parses a host name as a grant file must write it: already
// lowercase. The error says which rule the name breaks.
func ParseName(s string) (Name, error) {
	if err := check(s); err != nil {
		return Name{}, fmt.Errorf("host %q: %w", s, err)
	}
	return Name{s}, nil
}

// ParseHost parses a host name taken from a request (a URL's host, a
// SOCKS5 domain name): ASCII letters are folded to lowercase first, and
// nothing else is changed.
func ParseHost(s string) (Name, error) {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	if err := check(string(b)); err != nil {
		return Name{}, fmt.Errorf("host %q: %w", s, err)
	}
	return Name{string(b)}, nil
}

func check(s string) error {
	switch {
	case s == "":
		return errors.New("empty host name")
	case len(s) > MaxLen:
		return fmt.Errorf("longer than %d characters", MaxLen)
	case strings.Contains(s, "/"):
		return errors.New("a host name, not a URL or a path, is wanted")
	case strings.ContainsAny(s, "[]:"):
		return errors.New("an IP address is not a host name; grants name hosts")
	case strings.Contains(s, "*"):
		return errors.New("wildcards are not allowed; name each host exactly")
	case strings.HasSuffix(s, "."):
		return errors.New("trailing dot; write the name without it")
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return errors.New("an IP address is not a host name; grants name hosts")
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return errors.New("a single-label name resolves inside the owner's network; use a fully qualified name")
	}
	for _, l := range labels {
		if err := label(l); err != nil {
			return err
		}
	}
	last := labels[len(labels)-1]
	if c := last[0]; c < 'a' || c > 'z' {
		return fmt.Errorf("last label %q does not start with a letter (numeric names are IP addresses)", last)
	}
	return nil
}

func label(l string) error {
	if l == "" {
		return errors.New("empty label (two dots in a row, or a leading dot)")
	}
	if len(l) > 63 {
		return fmt.Errorf("label %q is longer than 63 characters", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-':
		case 'A' <= c && c <= 'Z':
			return errors.New("uppercase letter; write host names in lowercase")
		default:
			return fmt.Errorf("character %q is not allowed in a host name (letters, digits, '-' and '.'; use punycode for other scripts)", c)
		}
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("label %q starts or ends with '-'", l)
	}
	return nil
}

// Allowed reports whether host is one of allowed, exactly. The zero Name
// is never allowed.
func Allowed(host Name, allowed []Name) bool {
	if host.s == "" {
		return false
	}
	for _, a := range allowed {
		if a.s == host.s {
			return true
		}
	}
	return false
}
