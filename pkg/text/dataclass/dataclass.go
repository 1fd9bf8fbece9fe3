// Package dataclass labels data by how far it may travel: public, private
// or secret, in that order.
//
// Invariants:
//   - [Class] has exactly three values and a zero value that is not one of
//     them, so a forgotten label is caught ([Class.Valid]) rather than read
//     as public.
//   - A session's taint only rises: [Taint] is the join of everything the
//     session has seen and never below [Floor] (private), because the
//     owner's identity files are in every prompt, so no session is public.
//     Public is a provenance label and never lowers anything.
//   - A [Label] (class and untrusted) is the one label of a tool result,
//     from brokerd's answer to the session log; [Label.Join] only rises.
package dataclass

import "fmt"

// Class is a data class. The zero value is invalid.
type Class uint8

// The classes, ordered: a higher class may travel less far.
const (
	Public Class = iota + 1
	Private
	Secret
)

// Floor is every session's starting taint.
const Floor = Private

var names = [...]string{Public: "public", Private: "private", Secret: "secret"}

// Valid reports whether c is one of the three classes.
func (c Class) Valid() bool { return c >= Public && c <= Secret }

func (c Class) String() string {
	if !c.Valid() {
		return fmt.Sprintf("invalid class %d", uint8(c))
	}
	return names[c]
}

// Parse reads a class by its lowercase name; nothing else is accepted.
func Parse(s string) (Class, error) {
	for c := Public; c <= Secret; c++ {
		if names[c] == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("parse data class: %q is not public, private or secret", s)
}

// MarshalText writes the class's name; an invalid class is an error.
func (c Class) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("marshal data class: %v", c)
	}
	return []byte(names[c]), nil
}

// UnmarshalText parses the class's name (JSON and TOML both use it).
func (c *Class) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Join is the least class at or above both: the label of data built from
// a and b. An invalid operand is treated as [Secret], failing closed.
func Join(a, b Class) Class {
	if !a.Valid() || !b.Valid() {
		return Secret
	}
	return max(a, b)
}

// Taint is the taint of a session that has seen the given classes: the
// join of them all and [Floor].
func Taint(seen ...Class) Class {
	t := Floor
	for _, c := range seen {
		t = Join(t, c)
	}
	return t
}

// AtMost reports whether data of class c may go where limit allows.
func (c Class) AtMost(limit Class) bool {
	return c.Valid() && limit.Valid() && c <= limit
}

// Label is how a piece of data is labelled: its class, and whether it
// came from outside the owner's control (untrusted, so a reader treats it
// as data, never instructions). brokerd labels every tool result from the
// grants; broker.sock, loopd and the session log carry the label as it
// came (wire.ToolResult and sessionlog.ToolResult embed it, so their JSON
// keeps "class" and "untrusted" in place).
type Label struct {
	Class     Class `json:"class"`
	Untrusted bool  `json:"untrusted"`
}

// Join is the label of data built from l and m: the [Join] of their
// classes (an invalid one fails closed to [Secret]), untrusted if either
// is. It is commutative, associative and idempotent, so the label of many
// pieces does not depend on their order.
func (l Label) Join(m Label) Label {
	return Label{Class: Join(l.Class, m.Class), Untrusted: l.Untrusted || m.Untrusted}
}
