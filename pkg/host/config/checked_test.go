package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type checkedConf struct {
	Dir string `toml:"dir"`
	N   int    `toml:"n"`
}

// checkN refuses a negative n and fills its default, as a role's check does.
var checkN = Checked[checkedConf]{Check: func(c checkedConf, name string) (checkedConf, error) {
	if c.N < 0 {
		return checkedConf{}, errors.New("config " + name + ": n must not be negative")
	}
	if c.N == 0 {
		c.N = 7
	}
	return c, nil
}, Retired: map[string]string{"allow_uids": "the table decides; see docs/runbook.md#layout-accept"}}

// TestChecked: Load and Parse decode strictly, then run the role's
// check, which fills defaults and names the file in its refusal.
func TestChecked(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.toml")
	for _, tc := range []struct{ text, want string }{
		{"dir = \"/d\"\n", ""},
		{"dir = \"/d\"\nn = -1\n", "n must not be negative"},
		{"dir = \"/d\"\nN = 1\n", "case differs"},
		{"dir = \"/d\"\nm = 1\n", "unknown key m"},
		{"allow_uids = []\ndir = \"/d\"\n", "key allow_uids is no longer read; delete its line: the table decides"},
	} {
		os.WriteFile(p, []byte(tc.text), 0o600)
		for how, run := range map[string]func() (checkedConf, error){
			"Load":  func() (checkedConf, error) { return checkN.Load(p) },
			"Parse": func() (checkedConf, error) { return checkN.Parse([]byte(tc.text), p) },
		} {
			c, err := run()
			switch {
			case tc.want == "" && (err != nil || c.N != 7 || c.Dir != "/d"):
				t.Errorf("%s(%q) = %+v, %v; want the default n filled", how, tc.text, c, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p)):
				t.Errorf("%s(%q) = %v, want a refusal naming %s and %q", how, tc.text, err, p, tc.want)
			}
		}
	}
	os.Chmod(p, 0o666)
	if _, err := checkN.Load(p); err == nil || !strings.Contains(err.Error(), "owner-file-unsafe") {
		t.Errorf("Load of a world-writable config = %v, want the ownership refusal", err)
	}
}
