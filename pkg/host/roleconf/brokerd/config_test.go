package brokerd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

func TestExampleConfigLoads(t *testing.T) {
	c, err := Load("../../../../deploy/brokerd.toml")
	if err != nil {
		t.Fatalf("deploy/brokerd.toml: %v", err)
	}
	if c.ApprovalTTL().Minutes() != 15 || c.ResultCapBytes() != 65536 || c.GrantsDir != "/etc/boxmaker/grants" ||
		c.Runner == nil || c.Runner.Pids != 128 || c.Runner.ShellTimeoutS != 75 {
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
		{"timeout over loopd's", good + "[runner]\npodman_socket = \"/p.sock\"\nshell_timeout_s = 76\ntool_image = \"sha256:" + strings.Repeat("a", 64) + "\"\n", "between 1 and 75"},
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

// TestProtectedNamesBrokerdsOwnFiles: the runner is told every file and
// directory of brokerd's that no mount may reach (review item 2).
func TestProtectedNamesBrokerdsOwnFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.toml")
	body := "state_dir = \"/s\"\ngrants_dir = \"/g\"\nbroker_socket_dir = \"/b\"\nadmin_socket_dir = \"/a\"\n" +
		"memtool_socket = \"/m/memtool.sock\"\ngateway_socket = \"/w/gateway.sock\"\n" +
		"[secrets]\nFILE_ONE = \"file:/etc/bx/token\"\nENV_ONE = \"env:X\"\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Protected()
	for _, want := range []string{"/s", "/g", "/b", "/a", "/m", "/w", "/etc/bx/token", p} {
		if !slices.Contains(got, want) {
			t.Errorf("protected() = %q lacks %s", got, want)
		}
	}
	// Every entry of the state directory's layout table (issue 19 item 5),
	// by itself or by the entry that holds it.
	for _, e := range layout.Table {
		want := e.In("/s")
		if !slices.ContainsFunc(got, func(p string) bool { return p == want || strings.HasPrefix(want, p+"/") && p != "/s" }) && e != &layout.State {
			t.Errorf("protected() = %q covers no %s", got, want)
		}
	}
	if slices.Contains(got, "X") || len(got) != 8+len(layout.In("/s")) {
		t.Errorf("protected() = %q", got)
	}
}

// TestConsultRefusals: a bad endpoint or a temperature above 0.6 is
// refused.
func TestConsultRefusals(t *testing.T) {
	hot := 700
	for _, cc := range []Consult{
		{Endpoint: "http://api.example.com/v1"},
		{Endpoint: "https://api.example.com:8443/v1"},
		{Endpoint: "https://127.0.0.1/v1"},
		{Endpoint: "https://api.example.com/v1?key=x"},
		{Endpoint: "https://api.example.com/v1/chat/completions"},
		{Endpoint: "https://api.example.com/v1", TemperatureMilli: &hot},
		{Endpoint: "https://api.example.com/v1", IdleTimeoutS: 100, TotalTimeoutS: 50},
		{},
	} {
		if err := cc.check(); err == nil {
			t.Errorf("[consult] %+v accepted", cc)
		}
	}
}
