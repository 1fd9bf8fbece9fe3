// Package secret holds credentials (the Mattermost bot token, Honcho's
// key, tool secrets) and the one store they are loaded from.
//
// Invariants:
//   - a [Value] never shows its contents through fmt (every verb), log/slog,
//     encoding/json, encoding (text) or encoding/gob: each prints
//     [REDACTED] or fails. The only way to read it is [Value.Reveal], so a
//     leak has to be written on purpose and can be found with grep;
//   - the bytes sit two pointers deep, so even reflection-based printing
//     of a struct that holds a Value (fmt on an unexported field, or with
//     a verb the field's type cannot take) shows an address, never the
//     bytes;
//   - Values are not comparable with ==; [Value.Equal] compares in
//     constant time;
//   - a [Store] reads each secret from the backend its [Ref] names:
//     a systemd credential (the default), an environment variable, or a
//     file only the owner can read. Nothing else is accepted.
package secret

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
)

// Redacted is what every printing path shows instead of a secret.
const Redacted = "[REDACTED]"

// Value is a secret. The zero Value holds nothing ([Value.IsZero]).
type Value struct {
	_ [0]func() // not comparable: use Equal
	p *box
}

// box holds the bytes behind a second pointer: fmt's bad-verb path prints
// the struct a pointer points to (%s on a struct holding a Value shows
// "%!s(*secret.box=&{...})"), but it prints a nested pointer only as an
// address.
type box struct{ b *[]byte }

// New wraps b (copied) as a secret.
func New(b []byte) Value {
	c := append([]byte(nil), b...)
	return Value{p: &box{b: &c}}
}

// Reveal returns the secret's contents. It is the only way to read them:
// call it at the last moment, where the secret leaves the process (an
// Authorization header), and never pass the result to a logger.
func (v Value) Reveal() string {
	return string(v.bytes())
}

// IsZero reports whether v holds nothing.
func (v Value) IsZero() bool { return len(v.bytes()) == 0 }

func (v Value) bytes() []byte {
	if v.p == nil {
		return nil
	}
	return *v.p.b
}

// Equal compares two secrets in constant time (for equal lengths).
func (v Value) Equal(o Value) bool {
	return subtle.ConstantTimeCompare(v.bytes(), o.bytes()) == 1
}

// String returns [Redacted].
func (Value) String() string { return Redacted }

// GoString returns [Redacted], for %#v.
func (Value) GoString() string { return Redacted }

// Format prints [Redacted] for every verb and flag, so %x, %q, %d and
// friends cannot reach the bytes either.
func (Value) Format(f fmt.State, _ rune) { fmt.Fprint(f, Redacted) }

// LogValue makes log/slog print [Redacted].
func (Value) LogValue() slog.Value { return slog.StringValue(Redacted) }

// ErrEncode is returned by every encoder hook: a secret is never
// serialised by accident. Reveal it explicitly if it must be.
var ErrEncode = errors.New("secret: refusing to encode a secret value; use Reveal explicitly")

// MarshalJSON fails with [ErrEncode].
func (Value) MarshalJSON() ([]byte, error) { return nil, ErrEncode }

// MarshalText fails with [ErrEncode] (covers TOML and text encoders).
func (Value) MarshalText() ([]byte, error) { return nil, ErrEncode }

// GobEncode fails with [ErrEncode].
func (Value) GobEncode() ([]byte, error) { return nil, ErrEncode }

// MarshalBinary fails with [ErrEncode].
func (Value) MarshalBinary() ([]byte, error) { return nil, ErrEncode }
