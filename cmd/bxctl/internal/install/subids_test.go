package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

func brokerdUser(t testing.TB) units.User {
	for _, u := range units.Users() {
		if u.Role == layout.Brokerd {
			return u
		}
	}
	t.Fatal("no brokerd user")
	return units.User{}
}

func etcWith(t *testing.T, subuid, subgid string) string {
	d := t.TempDir()
	for name, text := range map[string]string{"subuid": subuid, "subgid": subgid} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestCheckSubIDs: brokerd's range is added when it has none, kept when
// it has exactly it, and any range of another user's that overlaps it
// (Debian's second and third users get 165536:65536 and 231072:65536)
// is refused, in either file.
func TestCheckSubIDs(t *testing.T) {
	u := brokerdUser(t)
	mine := "boxmaker-brokerd:200000:65536\n"
	alice := "alice:100000:65536\n"
	for _, c := range []struct {
		name, subuid, subgid string
		add                  bool
		anchor               string
	}{
		{"none yet", alice, alice, true, ""},
		{"files absent", "", "", true, ""},
		{"exactly brokerd's", alice + mine, alice + mine, false, ""},
		{"by uid", alice + "61004:200000:65536\n", alice + mine, false, ""},
		{"only in one file", mine, alice, true, ""},
		{"Debian's second user", alice + "bob:165536:65536\n", alice, false, "install-subid-overlap"},
		{"Debian's third user", alice, alice + "bob:165536:65536\ncarol:231072:65536\n", false, "install-subid-overlap"},
		{"inside it", "dave:210000:10\n" + mine, mine, false, "install-subid-overlap"},
		{"touching its end", "erin:265536:65536\n" + mine, mine, false, ""},
		{"touching its start", "erin:134464:65536\n" + mine, mine, false, ""},
		{"its last id", "erin:265535:1\n" + mine, mine, false, "install-subid-overlap"},
		{"another range of brokerd's", "boxmaker-brokerd:300000:65536\n", "", false, "install-user-conflict"},
		{"a line that does not parse", alice + "mallory:200000\n", alice, false, "install-subid-overlap"},
		{"a count of zero", "frank:1:0\n", alice, false, "install-subid-overlap"},
	} {
		add, err := checkSubIDs(etcWith(t, c.subuid, c.subgid), u)
		switch {
		case c.anchor == "" && (err != nil || add != c.add):
			t.Errorf("%s: checkSubIDs = %v, %v, want %v", c.name, add, err, c.add)
		case c.anchor != "" && (err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#"+c.anchor)):
			t.Errorf("%s: checkSubIDs = %v, want %s", c.name, err, c.anchor)
		}
	}
}

// FuzzParseSubIDs: an entry ParseSubIDs returns is one line's
// owner:start:count with a count of at least one, ids within 32 bits.
func FuzzParseSubIDs(f *testing.F) {
	f.Add([]byte("alice:100000:65536\n# c\n\nbob:165536:65536\n"))
	f.Add([]byte("x:1:\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := ParseSubIDs(b)
		if err != nil {
			return
		}
		for _, s := range ids {
			if s.Owner == "" || strings.ContainsAny(s.Owner, ":\n") || s.Count == 0 || s.Start > 1<<32-1 || s.Count > 1<<32-1 {
				t.Fatalf("ParseSubIDs(%q) gave %+v", b, s)
			}
		}
	})
}
