package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExampleConfigLoads(t *testing.T) {
	c, err := Load("../../../../deploy/brokerd.toml")
	if err != nil {
		t.Fatalf("deploy/brokerd.toml: %v", err)
	}
	if c.ttl().Minutes() != 15 || c.resultCap() != 65536 || c.GrantsDir != "/etc/boxmaker/grants" {
		t.Errorf("example = %+v", c)
	}
}

func TestConfigRefusals(t *testing.T) {
	good := "state_dir = \"/s\"\ngrants_dir = \"/g\"\nbroker_socket_dir = \"/b\"\nadmin_socket_dir = \"/a\"\n"
	for _, tt := range []struct{ name, body, want string }{
		{"same dirs", strings.Replace(good, `"/a"`, `"/b"`, 1), "must differ"},
		{"relative", strings.Replace(good, `"/g"`, `"g"`, 1), "grants_dir must be an absolute path"},
		{"ttl over a day", good + "approval_ttl_ms = 86400001\n", "one day"},
	} {
		p := filepath.Join(t.TempDir(), "b.toml")
		os.WriteFile(p, []byte(tt.body), 0o600)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Load = %v, want %q", tt.name, err, tt.want)
		}
	}
}
