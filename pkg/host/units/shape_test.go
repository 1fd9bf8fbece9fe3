package units

import (
	"strings"
	"testing"
)

// TestShapes: every key of the table, with and without the optional
// credential, is either repeatable or single, and a single key has one
// value; a planted second Type= value and an undecided key are refused.
func TestShapes(t *testing.T) {
	for _, given := range [][]string{nil, {HonchoKey}} {
		if err := CheckShapes(Table(given...)); err != nil {
			t.Errorf("table %v: %v", given, err)
		}
	}
	for s, keys := range Repeatable {
		for _, k := range keys {
			for _, o := range Single[s] {
				if o == k {
					t.Errorf("[%s] %s is both repeatable and single", s, k)
				}
			}
		}
	}
	plant := func(name string, f func(*Unit)) {
		u := Of("loopd")
		f(&u)
		err := CheckShapes([]Unit{u})
		if err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#") {
			t.Errorf("%s: not refused: %v", name, err)
		}
	}
	plant("two Type values", func(u *Unit) {
		for i, s := range u.Sections {
			for j, k := range s.Keys {
				if k.Name == "Type" {
					u.Sections[i].Keys[j].Values = []string{"exec", "simple"}
				}
			}
		}
	})
	plant("an undecided key", func(u *Unit) {
		u.Sections[1].Keys = append(u.Sections[1].Keys, Key{"LimitNOFILE", []string{"1024"}})
	})
}
