package honchoconf

import (
	"errors"
	"fmt"
)

// MaxIDLen is the longest id Honcho accepts: WorkspaceCreate, PeerCreate
// and SessionCreate declare max_length=512 (src/schemas/api.py).
const MaxIDLen = 512

// ID is a Honcho resource name (workspace, peer or session) that matches
// RESOURCE_NAME_PATTERN = r"^[a-zA-Z0-9_-]+$" (src/schemas/api.py, line 45)
// and is 1 to [MaxIDLen] characters. The zero ID is not valid and is
// refused wherever one is required.
type ID struct{ s string }

// ErrID is wrapped by every refusal of [ParseID].
var ErrID = errors.New("not a Honcho id")

// ParseID checks s against Honcho's id rule.
func ParseID(s string) (ID, error) {
	if len(s) == 0 || len(s) > MaxIDLen {
		return ID{}, fmt.Errorf("parse honcho id: %w: length %d, want 1 to %d", ErrID, len(s), MaxIDLen)
	}
	for i := range len(s) {
		if !idByte(s[i]) {
			return ID{}, fmt.Errorf("parse honcho id %q: %w: byte %d is not one of A-Z a-z 0-9 _ -", s, ErrID, i)
		}
	}
	return ID{s}, nil
}

// MustID is [ParseID] for constants in tests and code; it panics on a bad id.
func MustID(s string) ID {
	id, err := ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// String is the id as Honcho spells it.
func (id ID) String() string { return id.s }

// IsZero reports whether id was never parsed.
func (id ID) IsZero() bool { return id.s == "" }

// MarshalText writes the id; a zero ID refuses to encode, so that no
// request is ever sent with an empty name.
func (id ID) MarshalText() ([]byte, error) {
	if id.s == "" {
		return nil, fmt.Errorf("encode honcho id: %w: empty", ErrID)
	}
	return []byte(id.s), nil
}

// UnmarshalText parses an id from config or a response.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}
