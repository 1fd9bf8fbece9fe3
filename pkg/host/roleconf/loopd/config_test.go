package loopd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

func TestExampleConfigLoads(t *testing.T) {
	c, leftover, err := Load("../../../../deploy/loopd.toml", "/var/lib/boxmaker")
	if err != nil {
		t.Fatalf("deploy/loopd.toml: %v", err)
	}
	if leftover != nil || c.StateDir != "/var/lib/boxmaker" || c.MemorySocket != layout.MemoryRun.SocketIn("/var/lib/boxmaker") {
		t.Errorf("example config: leftover %q, paths %q %q", leftover, c.StateDir, c.MemorySocket)
	}
	if c.Model.Name != "ornith" || c.Model.MainSlot != 0 || *c.Model.BackgroundSlot != 1 || *c.Model.TemperatureMilli != 600 || c.Serving.NCtx != 131072 {
		t.Errorf("example config = %+v", c)
	}
	if tc := c.Turn; tc.MaxCalls != 12 || tc.RepeatLimit != 3 || tc.ToolResultCap != 16384 {
		t.Errorf("[turn] = %+v", tc)
	}
}

func TestConfigRefusals(t *testing.T) {
	good := "[model]\nname = \"m\"\n"
	for _, tt := range []struct{ name, body, want string }{
		{"state_dir not the table's", "state_dir = \"/s\"\n" + good, "key state_dir is no longer read"},
		{"no model", strings.Replace(good, "name = \"m\"", "", 1), "model.name is required"},
		{"no memoryd", "memory_socket = \"\"\n" + good, "key memory_socket is no longer read"},
		{"float temperature", good + "temperature = 0.6\n", "unknown key model.temperature"},
		{"bad skip", good + "[selftest]\nskip = [\"server\"]\n", `"server" is not a check that may be skipped`},
		{"negative slot", good + "main_slot = -1\n", "must not be negative"},
		{"epoch percent", good + "[epoch]\ncompact_at_percent = 101\n", "epoch.compact_at_percent is 101"},
		{"epoch tokens", good + "[epoch]\nsummary_max_tokens = -1\n", "epoch.summary_max_tokens is -1"},
		{"epoch key", good + "[epoch]\ncompact_at = 5\n", "unknown key epoch.compact_at"},
	} {
		p := filepath.Join(t.TempDir(), "loopd.toml")
		os.WriteFile(p, []byte(tt.body), 0o600)
		if _, _, err := Load(p, "/st"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Load = %v, want %q", tt.name, err, tt.want)
		}
	}
	p := filepath.Join(t.TempDir(), "loopd.toml")
	os.WriteFile(p, []byte(good), 0o600)
	c, _, err := Load(p, "/st")
	if err != nil {
		t.Fatal(err)
	}
	if *c.Model.BackgroundSlot != 1 {
		t.Errorf("background_slot defaults to %d, want 1", *c.Model.BackgroundSlot)
	}
}
