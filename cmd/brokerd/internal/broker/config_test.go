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
	if c.ttl().Minutes() != 15 || c.resultCap() != 65536 || c.GrantsDir != "/etc/boxmaker/grants" ||
		c.Runner == nil || c.Runner.Pids != 128 || c.Runner.ShellTimeoutS != 100 {
		t.Errorf("example = %+v", c)
	}
}

func TestConfigRefusals(t *testing.T) {
	good := "state_dir = \"/s\"\ngrants_dir = \"/g\"\nbroker_socket_dir = \"/b\"\nadmin_socket_dir = \"/a\"\n"
	for _, tt := range []struct{ name, body, want string }{
		{"same dirs", strings.Replace(good, `"/a"`, `"/b"`, 1), "must differ"},
		{"relative", strings.Replace(good, `"/g"`, `"g"`, 1), "grants_dir must be an absolute path"},
		{"ttl over a day", good + "approval_ttl_ms = 86400001\n", "one day"},
		{"image by name", good + "[runner]\npodman_socket = \"/p.sock\"\ntool_image = \"localhost/tool:latest\"\n", "must be an image ID"},
		{"image short id", good + "[runner]\npodman_socket = \"/p.sock\"\ntool_image = \"sha256:abc\"\n", "must be an image ID"},
		{"no socket", good + "[runner]\ntool_image = \"sha256:" + strings.Repeat("a", 64) + "\"\n", "podman_socket is missing"},
		{"tcp socket", good + "[runner]\npodman_socket = \"tcp://h:1\"\ntool_image = \"sha256:" + strings.Repeat("a", 64) + "\"\n", "unix:// URL"},
		{"timeout over loopd's", good + "[runner]\npodman_socket = \"/p.sock\"\nshell_timeout_s = 120\ntool_image = \"sha256:" + strings.Repeat("a", 64) + "\"\n", "between 1 and 105"},
		{"negative memory", good + "[runner]\npodman_socket = \"/p.sock\"\nmemory_mb = -1\ntool_image = \"sha256:" + strings.Repeat("a", 64) + "\"\n", "memory_mb"},
		{"secret name", good + "[secrets]\ngithub = \"env:X\"\n", "uppercase"},
		{"secret ref", good + "[secrets]\nGITHUB = \"ftp:X\"\n", "backend"},
	} {
		p := filepath.Join(t.TempDir(), "b.toml")
		os.WriteFile(p, []byte(tt.body), 0o600)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Load = %v, want %q", tt.name, err, tt.want)
		}
	}
}
