package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type checkedConf struct {
	Dir  string `toml:"dir"`
	N    int    `toml:"n"`
	Sock string `toml:"-"` // placed: the state directory's run/x.sock
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
}, Retired: map[string]string{"allow_uids": "the table decides; see docs/runbook.md#layout-accept"},
	Placed: Placed[checkedConf]{"sock": {Field: func(c *checkedConf) *string { return &c.Sock }, In: func(s string) string { return s + "/run/x.sock" }}}}

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
		for how, run := range map[string]func() (checkedConf, []string, error){
			"Load":  func() (checkedConf, []string, error) { return checkN.Load(p, "/st") },
			"Parse": func() (checkedConf, []string, error) { return checkN.Parse([]byte(tc.text), p, "/st") },
		} {
			c, leftover, err := run()
			switch {
			case tc.want == "" && (err != nil || c.N != 7 || c.Dir != "/d" || c.Sock != "/st/run/x.sock" || leftover != nil):
				t.Errorf("%s(%q) = %+v, %v; want the default n filled", how, tc.text, c, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p)):
				t.Errorf("%s(%q) = %v, want a refusal naming %s and %q", how, tc.text, err, p, tc.want)
			}
		}
	}
	os.Chmod(p, 0o666)
	if _, _, err := checkN.Load(p, "/st"); err == nil || !strings.Contains(err.Error(), "owner-file-unsafe") {
		t.Errorf("Load of a world-writable config = %v, want the ownership refusal", err)
	}
}

// TestPlaced: a key the layout table now decides is accepted only with
// the table's own value, with one line saying to delete it; any other
// value (an empty one included) is refused with one line naming the key,
// the table's value and the runbook; without a state directory nothing
// is placed and the config is refused.
func TestPlaced(t *testing.T) {
	const want = `config r.toml: key sock is no longer read: the layout table gives "/st/run/x.sock" (from the state directory /st); delete its line; see docs/runbook.md#layout-key-moved`
	for _, tc := range []struct{ text, err, leftover string }{
		{"dir = \"/d\"\n", "", ""},
		{"sock = \"/st/run/x.sock\"\ndir = \"/d\"\n", "", `config r.toml: key sock is no longer read (its value is the layout table's, "/st/run/x.sock"); delete its line; see docs/runbook.md#layout-key-moved`},
		{"sock = \"/run/x.sock\"\ndir = \"/d\"\n", want, ""},
		{"sock = \"\"\ndir = \"/d\"\n", want, ""},
		{"sock = 3\ndir = \"/d\"\n", want, ""},
	} {
		c, leftover, err := checkN.Parse([]byte(tc.text), "r.toml", "/st")
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("Parse(%q) = %v, want exactly %q", tc.text, err, tc.err)
		case tc.err == "" && (err != nil || c.Sock != "/st/run/x.sock"):
			t.Errorf("Parse(%q) = %+v, %v; want the table's path", tc.text, c, err)
		case tc.err == "" && strings.Join(leftover, "|") != tc.leftover:
			t.Errorf("Parse(%q) leftover = %q, want %q", tc.text, leftover, tc.leftover)
		}
	}
	if _, _, err := checkN.Parse([]byte("dir = \"/d\"\n"), "r.toml", ""); err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#state-dir-missing") {
		t.Errorf("Parse without a state directory = %v, want the state-dir-missing refusal", err)
	}
}
