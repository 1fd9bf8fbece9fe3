package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
)

const gatewayText = "url = \"https://chat.example.com\"\ntoken = \"credential:mattermost-token\"\n\n[allow]\nusers = [\"u1\"]\nchannels = []\n"

// TestReadGatewayConfig: the token key itself must be the credential;
// the credential's name in a comment or another key does not do.
func TestReadGatewayConfig(t *testing.T) {
	write := func(text string, mode os.FileMode) string {
		p := filepath.Join(t.TempDir(), "gatewayd.toml")
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	if _, err := readGatewayConfig(write(gatewayText, 0o600), ownership.Self()); err != nil {
		t.Fatalf("readGatewayConfig(good) = %v", err)
	}
	for name, text := range map[string]string{
		"only in a comment":   "url = \"https://c\"\n# token = \"credential:mattermost-token\"\ntoken = \"xoxb-canary-secret\"\n",
		"in another key":      "url = \"https://c\"\nnote = \"credential:mattermost-token\"\ntoken = \"xoxb-canary-secret\"\n",
		"in a table":          "url = \"https://c\"\ntoken = \"xoxb-canary-secret\"\n[x]\ntoken = \"credential:mattermost-token\"\n",
		"in another case":     "Token = \"credential:mattermost-token\"\n",
		"no token":            "url = \"https://c\"\n",
		"not a string":        "token = 1\n",
		"does not parse":      "token = \"credential:mattermost-token\"\n[allow\n",
		"twice":               "token = \"credential:mattermost-token\"\ntoken = \"xoxb-canary-secret\"\n",
		"in a multiline text": "note = '''\ntoken = \"credential:mattermost-token\"\n'''\ntoken = \"xoxb-canary-secret\"\n",
	} {
		_, err := readGatewayConfig(write(text, 0o600), ownership.Self())
		if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#install-token") {
			t.Errorf("%s: readGatewayConfig = %v, want install-token", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "canary-secret") {
			t.Errorf("%s: the refusal quotes the token: %v", name, err)
		}
	}
	if _, err := readGatewayConfig(write(gatewayText, 0o666), ownership.Self()); err == nil || !strings.Contains(err.Error(), "install-input-unsafe") {
		t.Errorf("readGatewayConfig(world-writable) = %v, want install-input-unsafe", err)
	}
}

// TestSetKey: an installer-owned key is set on its own line, everything
// else the owner wrote (comments, other keys, order) kept byte for byte.
func TestSetKey(t *testing.T) {
	text := "# mine\nstate_dir = \"/s\"\n\n[runner]\n# my comment\npodman_socket = \"/p\"\n  tool_image = \"sha256:old\" # built in May\nmemory_mb = 1024\n\n[secrets]\ntool_image = \"credential:x\"\n"
	out, changed, err := setKey("brokerd.toml", text, "runner", "tool_image", "sha256:new")
	want := strings.Replace(text, "  tool_image = \"sha256:old\" # built in May", "  tool_image = \"sha256:new\"", 1)
	if err != nil || !changed || out != want {
		t.Errorf("setKey = %q, %v, %v; want %q", out, changed, err, want)
	}
	if out, changed, err := setKey("brokerd.toml", want, "runner", "tool_image", "sha256:new"); err != nil || changed || out != want {
		t.Errorf("setKey(already set) = %v, %v", changed, err)
	}
	if out, changed, err := setKey("inferproxy.toml", "socket_dir = \"/r\"\nupstream = \"127.0.0.1:8080\"\n", "", "upstream", "100.64.0.7:8080"); err != nil || !changed || !strings.Contains(out, "upstream = \"100.64.0.7:8080\"\n") {
		t.Errorf("setKey(top level) = %q, %v, %v", out, changed, err)
	}
	for name, text := range map[string]string{
		"no runner table":  "state_dir = \"/s\"\n",
		"no such key":      "[runner]\npodman_socket = \"/p\"\n",
		"a dotted key":     "runner.tool_image = \"sha256:old\"\n",
		"an inline table":  "runner = { tool_image = \"sha256:old\" }\n",
		"a multiline text": "[runner]\nnote = \"\"\"\ntool_image = \"x\"\n\"\"\"\ntool_image = \"sha256:old\"\n",
		"does not parse":   "[runner\ntool_image = \"sha256:old\"\n",
	} {
		if _, _, err := setKey("brokerd.toml", text, "runner", "tool_image", "sha256:new"); err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#install-config-key") {
			t.Errorf("%s: setKey = %v, want install-config-key", name, err)
		}
	}
}

func TestLineDiff(t *testing.T) {
	a := "url = \"u\"\ntoken = \"xoxb-canary-secret\"\n[allow]\nusers = [\"u1\", \"u2\"]\n"
	b := "url = \"u\"\ntoken = \"credential:mattermost-token\"\n[allow]\nusers = [\"u1\"]\n"
	d := lineDiff(a, b)
	for _, want := range []string{"  - users = [\"u1\", \"u2\"]\n", "  + users = [\"u1\"]\n", "  + token = \"credential:mattermost-token\"\n"} {
		if !strings.Contains(d, want) {
			t.Errorf("lineDiff lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "canary") || strings.Contains(d, "url") {
		t.Errorf("lineDiff shows a token in clear or an equal line:\n%s", d)
	}
}

// FuzzSetKey: whatever the owner's file holds, setKey either refuses or
// returns a file that decodes to the same values with the key set.
func FuzzSetKey(f *testing.F) {
	f.Add("[runner]\ntool_image = \"sha256:old\"\nmemory_mb = 1\n")
	f.Add("x = 1\n[runner]\n  tool_image = 'a' # c\n[secrets]\ntool_image = \"b\"\n")
	f.Add("[runner]\nnote = \"\"\"\ntool_image = \"x\"\n\"\"\"\ntool_image = \"y\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		out, _, err := setKey("brokerd.toml", text, "runner", "tool_image", "sha256:new")
		if err != nil {
			return
		}
		var m map[string]any
		if _, err := toml.Decode(out, &m); err != nil {
			t.Fatalf("setKey(%q) = %q, which does not parse: %v", text, out, err)
		}
		if v, ok := get(m, "runner", "tool_image"); !ok || v != "sha256:new" {
			t.Fatalf("setKey(%q) = %q, tool_image %v", text, out, v)
		}
	})
}
