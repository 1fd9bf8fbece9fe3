package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
)

func TestExampleConfigLoads(t *testing.T) {
	c, _, err := gatewayd.Load("../../../../deploy/gatewayd.toml", "/var/lib/boxmaker")
	if err != nil {
		t.Fatalf("deploy/gatewayd.toml: %v", err)
	}
	if c.MaxApprovalParts != 4 || c.Token.String() != "credential:mattermost-token" || len(c.Approvers()) != 1 {
		t.Errorf("example = %+v", c)
	}
}

func TestConfigRefusals(t *testing.T) {
	base := `url = "https://mm.example"
token = "credential:t"
[allow]
users = ["aaaaaaaaaaaaaaaaaaaaaaaaaa"]
`
	for _, tt := range []struct{ name, text, want string }{
		{"token in config", strings.Replace(base, `"credential:t"`, `"k3j9x8c7v6b5n4m3q2w1e0r9ty"`, 1), "token looks like a Mattermost token"},
		{"token as a file ref", strings.Replace(base, `"credential:t"`, `"file:k3j9x8c7v6b5n4m3q2w1e0r9ty"`, 1), "absolute path"},
		{"no token", strings.Replace(base, "token = \"credential:t\"\n", "", 1), "token is required"},
		{"no users", strings.Replace(base, `users = ["aaaaaaaaaaaaaaaaaaaaaaaaaa"]`, `users = []`, 1), "nobody would be heard"},
		{"username not id", strings.Replace(base, `"aaaaaaaaaaaaaaaaaaaaaaaaaa"`, `"owner"`, 1), "not a Mattermost id"},
		{"socket elsewhere", "socket_dir = \"/g\"\n" + base, `key socket_dir is no longer read: the layout table gives "/st/run/gateway"`},
		{"unknown key", base + "secret = \"x\"\n", "secret"},
		{"approver not allowed", base + "[approvals]\nusers = [\"bbbbbbbbbbbbbbbbbbbbbbbbbb\"]\n", "docs/runbook.md#gateway-approver-not-allowed"},
		{"too many parts", strings.Replace(base, "[allow]", "max_approval_parts = 99\n[allow]", 1), "max_approval_parts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "g.toml")
			os.WriteFile(p, []byte(tt.text), 0o600)
			_, _, err := gatewayd.Load(p, "/st")
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "k3j9x8c7") {
				t.Errorf("Load = %v, want %q", err, tt.want)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "g.toml")
	os.WriteFile(p, []byte(base), 0o600)
	if c, _, err := gatewayd.Load(p, "/st"); err != nil || c.MaxApprovalParts != gatewayd.DefaultMaxApprovalParts || c.LoopSocket != layout.LoopRun.SocketIn("/st") || c.MemoryChatSocket != layout.MemchatRun.SocketIn("/st") {
		t.Errorf("gatewayd.Load(base) = %+v, %v", c, err)
	}
}
