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
	c, leftover, err := Load("../../../../deploy/brokerd.toml", "/var/lib/boxmaker")
	if err != nil || leftover != nil {
		t.Fatalf("deploy/brokerd.toml: %v (leftover %q)", err, leftover)
	}
	if c.ApprovalTTL().Minutes() != 15 || c.ResultCapBytes() != 65536 || c.GrantsDir != "/var/lib/boxmaker/grants" ||
		c.Runner == nil || c.Runner.Pids != 128 || c.Runner.ShellTimeoutS != 75 {
		t.Errorf("example = %+v", c)
	}
}

func TestConfigRefusals(t *testing.T) {
	good := "result_cap = 1\n"
	for _, tt := range []struct{ name, body, want string }{
		{"grants elsewhere", "grants_dir = \"/g\"\n" + good, "key grants_dir is no longer read: the layout table gives \"/st/grants\""},
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
		if _, _, err := Load(p, "/st"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Load = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestProtectedNamesBrokerdsOwnFiles: the runner is told every file and
// directory of brokerd's that no mount may reach (review item 2).
func TestProtectedNamesBrokerdsOwnFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.toml")
	body := "[secrets]\nFILE_ONE = \"file:/etc/bx/token\"\nENV_ONE = \"env:X\"\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := Load(p, "/s")
	if err != nil {
		t.Fatal(err)
	}
	got := c.Protected()
	for _, want := range []string{"/s", "/s/grants", "/s/mcp", "/s/run/broker", "/s/run/admin", "/s/run/gate", "/s/run/memtool", "/s/run/gateway", "/etc/bx/token", p} { // mcp: beside the grants (mcp.go)
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
	if slices.Contains(got, "X") || len(got) != 10+len(layout.In("/s")) {
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
