package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// The chain's line rules (see "What is hashed" in the package doc). They
// are exported because package consultlog's chain follows the same
// rules: one definition, so the two logs cannot drift apart.

// ParseCanonical decodes line (without its newline) through u strictly,
// checks the record with check, and accepts it only if the line is byte
// for byte the canonical encoding of the record it decodes to, so each
// record has one line and one hash. A line over maxLine bytes is refused
// before it is decoded.
func ParseCanonical[R strict.Variant](u *strict.Union[R], line []byte, maxLine int, check func(R) error) (R, error) {
	var zero R
	if len(line) > maxLine {
		return zero, fmt.Errorf("line of %d bytes is over the limit of %d", len(line), maxLine)
	}
	r, err := u.Decode(line)
	if err != nil {
		return zero, err
	}
	if err := check(r); err != nil {
		return zero, err
	}
	again, err := u.Encode(r)
	if err != nil {
		return zero, err
	}
	if !bytes.Equal(again, line) {
		return zero, fmt.Errorf("not canonical: the record encodes as %.120s", again)
	}
	return r, nil
}

// CheckHeader checks the form of a line's seq (1 or more), time (in
// [TimeLayout], canonically) and prev (a lowercase hex SHA-256). Whether
// seq and prev are the right ones is the verifier's to say.
func CheckHeader(h Header) error {
	if h.Seq < 1 {
		return fmt.Errorf("seq %d: want 1 or more", h.Seq)
	}
	if err := checkTime(h.Time); err != nil {
		return err
	}
	if !IsHash(h.Prev) {
		return fmt.Errorf("prev %q is not a lowercase hex SHA-256", h.Prev)
	}
	return nil
}

// IsHash reports whether s is 64 lowercase hex digits, the form of every
// hash on the chain.
func IsHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// LineHash is the chain's hash of a line: the lowercase hex SHA-256 of
// its bytes as stored, without the newline.
func LineHash(line []byte) string { return hashHex(sha256.Sum256(line)) }

// hashHex is the chain's hash of a line: lowercase hex SHA-256.
func hashHex(sum [sha256.Size]byte) string { return hex.EncodeToString(sum[:]) }
