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

// TestLabelJoin: a join is at or above both operands, untrusted if either
// is, and order-free; an invalid class fails closed to secret.
func TestLabelJoin(t *testing.T) {
	var labels []Label
	for _, c := range append(all, 0) {
		labels = append(labels, Label{Class: c}, Label{Class: c, Untrusted: true})
	}
	for _, a := range labels {
		for _, b := range labels {
			j := a.Join(b)
			if j != b.Join(a) || j.Join(j) != j || j.Untrusted != (a.Untrusted || b.Untrusted) || j.Class != Join(a.Class, b.Class) {
				t.Errorf("%+v.Join(%+v) = %+v", a, b, j)
			}
			for _, c := range labels {
				if a.Join(b).Join(c) != a.Join(b.Join(c)) {
					t.Errorf("Join is not associative on %+v, %+v, %+v", a, b, c)
				}
			}
		}
	}
	if got := (Label{Class: Public}).Join(Label{}); got.Class != Secret {
		t.Errorf("Join with an unlabelled class = %+v, want secret", got)
	}
}

// TestLabelEmbedded: embedded, a label's fields sit in place in the JSON
// of the struct that carries it, as the tool results' golden files hold.
func TestLabelEmbedded(t *testing.T) {
	type result struct {
		Output string `json:"output"`
		Label
		Posted *int `json:"posted,omitempty"`
	}
	b, err := strict.Marshal(result{Output: "x", Label: Label{Class: Private, Untrusted: true}})
	if want := `{"output":"x","class":"private","untrusted":true}`; err != nil || string(b) != want {
		t.Errorf("Marshal = %s, %v; want %s", b, err, want)
	}
	var r result
	if err := strict.Unmarshal([]byte(`{"output":"x","class":"secret","untrusted":false}`), &r); err != nil || r.Class != Secret || r.Untrusted {
		t.Errorf("Unmarshal = %+v, %v", r, err)
	}
	if err := strict.Unmarshal([]byte(`{"output":"x","class":"secret"}`), &r); err == nil {
		t.Error("Unmarshal accepted a result without its untrusted flag")
	}
}
