package memd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func writeConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	text := extra
	p := filepath.Join(dir, "memoryd.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// load is [Load] with the config's own directory the state directory.
func load(p string) (Config, error) {
	c, _, err := Load(p, filepath.Dir(p))
	return c, err
}

const honchoTable = `
[honcho]
url = "http://127.0.0.1:8000"
key = "credential:honcho-key"
peer = "agent"
trusted_workspace = "agent-trusted"
untrusted_workspace = "agent-untrusted"
[[honcho.workspaces]]
name = "other-trusted"
trust = "trusted"
`

func TestHonchoTable(t *testing.T) {
	c, err := load(writeConfig(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Fleet(); ok {
		t.Fatal("no [honcho] table, but Fleet is set")
	}
	c, err = load(writeConfig(t, honchoTable))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.Fleet()
	if !ok || s.Peer.String() != "agent" || !s.HasKey() || len(s.Others) != 1 || !s.Others[0].Trusted {
		t.Fatalf("Fleet = %+v, %v", s, ok)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`key = "credential:honcho-key"`, `key = "eyJhbGciOiJIUzI1NiJ9.eyJ3IjoiYWdlbnQifQ.sig"`, "honcho-key-in-config"},
		{`peer = "agent"`, `peer = "agent"` + "\n" + `peers = "x"`, "unknown key honcho.peers"},
		{`trust = "trusted"`, `trust = "maybe"`, "honcho-config-refused"},
	} {
		_, err := load(writeConfig(t, strings.Replace(honchoTable, tc.from, tc.to, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "eyJ") {
			t.Errorf("Load with %s = %v, want %q", tc.to, err, tc.want)
		}
	}
}

// The commented [honcho] example in deploy/memoryd.toml, uncommented,
// loads: the documented keys are the code's.
func TestHonchoExample(t *testing.T) {
	b, err := os.ReadFile("../../../../deploy/memoryd.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(b), "#[honcho]\n")
	if !ok {
		t.Fatal("deploy/memoryd.toml has no #[honcho] example")
	}
	var lines []string
	for _, l := range strings.Split(example, "\n") {
		if strings.HasPrefix(l, "#[") || strings.Contains(l, " = ") && strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "# ") {
			lines = append(lines, l[1:])
		}
	}
	if len(lines) < 9 {
		t.Fatalf("only %d example lines found: %q", len(lines), lines)
	}
	c, err := load(writeConfig(t, "[honcho]\n"+strings.Join(lines, "\n")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := c.Fleet(); !ok || s.Untrusted.String() != "host1-untrusted" || len(s.Others) != 1 {
		t.Fatalf("Fleet = %+v", s)
	}
}

func TestGateConfig(t *testing.T) {
	p := writeConfig(t, "gate_timeout_ms = 500\n")
	if c, err := load(p); err != nil || c.GateSocket != filepath.Join(filepath.Dir(p), "run", "gate", wire.Gate.Name) {
		t.Fatalf("gate config: %+v, %v", c, err)
	}
	for _, bad := range []string{"gate_socket = \"/run/boxmaker/gate/" + wire.Gate.Name + "\"\n", "gate_timeout_ms = 20000\n", "gate_timeout_ms = -1\n"} {
		if _, err := load(writeConfig(t, bad)); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
