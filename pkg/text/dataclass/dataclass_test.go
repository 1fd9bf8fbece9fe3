package dataclass

import (
	"encoding/json"
	"testing"
	"testing/quick"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

var all = []Class{Public, Private, Secret}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Class
		ok   bool
	}{
		{"public", Public, true}, {"private", Private, true}, {"secret", Secret, true},
		{"Secret", 0, false}, {"SECRET", 0, false}, {"", 0, false}, {"top-secret", 0, false}, {" public", 0, false},
	} {
		got, err := Parse(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestJSON(t *testing.T) {
	type rec struct {
		Class Class `json:"class"`
	}
	var r rec
	if err := strict.Unmarshal([]byte(`{"class":"secret"}`), &r); err != nil || r.Class != Secret {
		t.Fatalf("decode = %v, %v", r, err)
	}
	for _, bad := range []string{`{"class":"Secret"}`, `{"class":3}`, `{"class":null}`} {
		if err := strict.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("decode(%s) succeeded", bad)
		}
	}
	if _, err := json.Marshal(rec{}); err == nil {
		t.Error("marshalling the zero class succeeded; a forgotten label must not be written")
	}
}

func TestTaintFloor(t *testing.T) {
	if got := Taint(); got != Private {
		t.Errorf("Taint() = %v, want private", got)
	}
	if got := Taint(Public, Public); got != Private {
		t.Errorf("Taint(public, public) = %v, want private: public never lowers a session", got)
	}
	if got := Taint(Public, Secret, Private); got != Secret {
		t.Errorf("Taint(public, secret, private) = %v, want secret", got)
	}
	if got := Join(Public, Class(0)); got != Secret {
		t.Errorf("Join with an invalid class = %v, want secret (fail closed)", got)
	}
}

// TestJoinLattice checks the join against the order: it is the least upper
// bound, commutative, associative and idempotent.
func TestJoinLattice(t *testing.T) {
	pick := func(i uint8) Class { return all[int(i)%3] }
	props := map[string]any{
		"commutative": func(a, b uint8) bool { return Join(pick(a), pick(b)) == Join(pick(b), pick(a)) },
		"associative": func(a, b, c uint8) bool {
			x, y, z := pick(a), pick(b), pick(c)
			return Join(Join(x, y), z) == Join(x, Join(y, z))
		},
		"idempotent": func(a uint8) bool { return Join(pick(a), pick(a)) == pick(a) },
		"upper bound and least": func(a, b uint8) bool {
			x, y := pick(a), pick(b)
			j := Join(x, y)
			if !x.AtMost(j) || !y.AtMost(j) {
				return false
			}
			for _, u := range all {
				if x.AtMost(u) && y.AtMost(u) && !j.AtMost(u) {
					return false
				}
			}
			return true
		},
		"taint never below floor and monotone": func(seen []uint8, next uint8) bool {
			cs := make([]Class, len(seen))
			for i, s := range seen {
				cs[i] = pick(s)
			}
			before := Taint(cs...)
			after := Taint(append(cs, pick(next))...)
			return Floor.AtMost(before) && before.AtMost(after)
		},
	}
	for name, f := range props {
		if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
