package toolargs

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
)

// MaxURLLen caps a URL argument.
const MaxURLLen = 8192

// URL is an http or https URL whose host is a [hostrule.Name]: no user
// information, no port, no IP literal, and written in the form Go's
// net/url writes it back, so that the string the owner approves, the
// string curl fetches and the host the proxy allows cannot disagree.
// The zero value is not a URL.
type URL struct {
	raw  string
	host hostrule.Name
}

// ParseURL parses a URL argument under the rules of [URL].
func ParseURL(s string) (URL, error) {
	u, err := parseURL(s)
	if err != nil {
		return URL{}, fmt.Errorf("url %q: %w", s, err)
	}
	return u, nil
}

func parseURL(s string) (URL, error) {
	if s == "" {
		return URL{}, errors.New("empty")
	}
	if len(s) > MaxURLLen {
		return URL{}, fmt.Errorf("longer than %d bytes", MaxURLLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || c == '\\' || c >= 0x80 {
			return URL{}, fmt.Errorf("character %q must be percent-encoded", c)
		}
	}
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		return URL{}, errors.New("scheme must be http or https, in lowercase, followed by //")
	}
	u, err := url.Parse(s)
	if err != nil {
		return URL{}, errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("parse %q: ", s)))
	}
	switch {
	case u.User != nil:
		return URL{}, errors.New("user information is not allowed")
	case strings.HasPrefix(u.Host, "["):
		return URL{}, errors.New("an IP address is not a host name; grants name hosts")
	case u.Host != u.Hostname():
		return URL{}, errors.New("a port is not allowed; grants name hosts, and the scheme's port is used")
	}
	host, err := hostrule.ParseHost(u.Hostname())
	if err != nil {
		return URL{}, err
	}
	if u.String() != s {
		return URL{}, fmt.Errorf("not in canonical form; write %q", u.String())
	}
	return URL{raw: s, host: host}, nil
}

// String returns the URL exactly as given.
func (u URL) String() string { return u.raw }

// Host is the URL's host name, folded to lowercase.
func (u URL) Host() hostrule.Name { return u.host }

// IsZero reports whether u is the zero value.
func (u URL) IsZero() bool { return u.raw == "" }

// MarshalText writes the URL; the zero value is an error.
func (u URL) MarshalText() ([]byte, error) {
	if u.raw == "" {
		return nil, errors.New("marshal url: empty")
	}
	return []byte(u.raw), nil
}
