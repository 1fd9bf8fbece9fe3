package toolargs

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// MaxPathLen caps a path argument, as Linux's PATH_MAX does.
const MaxPathLen = 4096

// Path is an absolute path in clean form: it starts with '/', has no
// empty, "." or ".." element and no trailing slash ("/" itself is a
// Path), holds no ':' or ',' (Podman's --volume separators), no control
// character, and is valid UTF-8. The zero value is not a path and is
// within nothing.
type Path struct {
	p string
}

// ParsePath parses a path argument. A path that is not already clean is
// refused, not cleaned: what the owner approves and what is mounted must
// be the very string the model wrote.
func ParsePath(s string) (Path, error) {
	if err := checkPath(s); err != nil {
		return Path{}, fmt.Errorf("path %q: %w", s, err)
	}
	return Path{s}, nil
}

func checkPath(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > MaxPathLen:
		return fmt.Errorf("longer than %d bytes", MaxPathLen)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	case s[0] != '/':
		return errors.New("not absolute")
	case strings.ContainsAny(s, ":,"):
		return errors.New("contains ':' or ',', which container mounts use as separators")
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return fmt.Errorf("contains control character %U", r)
		}
	}
	for _, el := range strings.Split(s[1:], "/") {
		if el == ".." {
			return errors.New("contains a \"..\" element")
		}
	}
	if c := path.Clean(s); c != s {
		return fmt.Errorf("not in clean form; write %q", c)
	}
	return nil
}

// String returns the path.
func (p Path) String() string { return p.p }

// IsZero reports whether p is the zero value (no path).
func (p Path) IsZero() bool { return p.p == "" }

// Within reports whether p is root or lies under it, comparing whole
// elements: /home/a is within /home/a and /home, not within /home/ab.
func (p Path) Within(root Path) bool {
	if p.p == "" || root.p == "" {
		return false
	}
	if p.p == root.p || root.p == "/" {
		return true
	}
	return strings.HasPrefix(p.p, root.p+"/")
}

// StrictlyWithin reports whether p lies under root and is not root.
func (p Path) StrictlyWithin(root Path) bool {
	return p.p != root.p && p.Within(root)
}

// Dir is p's parent directory ("/" for "/" and for "/x").
func (p Path) Dir() Path {
	if p.p == "" {
		return Path{}
	}
	return Path{path.Dir(p.p)}
}

// MarshalText writes the path; the zero value is an error.
func (p Path) MarshalText() ([]byte, error) {
	if p.p == "" {
		return nil, errors.New("marshal path: empty")
	}
	return []byte(p.p), nil
}

// UnmarshalText parses a path as [ParsePath].
func (p *Path) UnmarshalText(b []byte) error {
	v, err := ParsePath(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
