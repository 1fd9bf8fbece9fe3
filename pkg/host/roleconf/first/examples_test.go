package first

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
)

// loaders are each role's own loader, as its daemon and bxctl doctor run
// it: what it keeps of a config is not asked here, only whether it
// accepts it and what it says.
var loaders = map[string]func(data []byte, name, state string) ([]string, error){
	layout.Inferproxy: func(b []byte, n, s string) ([]string, error) { _, l, err := inferproxy.Parse(b, n, s); return l, err },
	layout.Loopd:      func(b []byte, n, s string) ([]string, error) { _, l, err := loopd.Parse(b, n, s); return l, err },
	layout.Brokerd:    func(b []byte, n, s string) ([]string, error) { _, l, err := brokerd.Parse(b, n, s); return l, err },
	layout.Memoryd:    func(b []byte, n, s string) ([]string, error) { _, l, err := memoryd.Parse(b, n, s); return l, err },
	layout.Gatewayd:   func(b []byte, n, s string) ([]string, error) { _, l, err := gatewayd.Parse(b, n, s); return l, err },
}

// exampleState is the state directory of the example configs (the
// NixOS module's and bxctl install's, pkg/host/units).
const exampleState = "/var/lib/boxmaker"

// TestEarlierExampleConfigs: the example configs as they were before the
// paths left them (testdata/deploy-2026-12, deploy/*.toml as they were on
// branch next) each name their sockets under /run/boxmaker, not where
// the layout table puts them in the state directory, so each is refused
// with exactly one line: the first such key (in key order), the table's
// value instead, and the runbook entry.
func TestEarlierExampleConfigs(t *testing.T) {
	want := map[string]string{
		layout.Inferproxy: `key socket_dir is no longer read: the layout table gives "/var/lib/boxmaker/run/infer"`,
		layout.Loopd:      `key broker_socket is no longer read: the layout table gives "/var/lib/boxmaker/run/broker/broker.sock"`,
		layout.Brokerd:    `key admin_socket_dir is no longer read: the layout table gives "/var/lib/boxmaker/run/admin"`,
		layout.Memoryd:    `key admin_socket_dir is no longer read: the layout table gives "/var/lib/boxmaker/run/memadmin"`,
		layout.Gatewayd:   `key loop_socket is no longer read: the layout table gives "/var/lib/boxmaker/run/loop/loop.sock"`,
	}
	for _, role := range layout.Daemons {
		path := filepath.Join("testdata", "deploy-2026-12", role+".toml")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		leftover, err := loaders[role](b, path, exampleState)
		line := "config " + path + ": " + want[role] + " (from the state directory " + exampleState + "); delete its line; see docs/runbook.md#layout-key-moved"
		if err == nil || err.Error() != line || leftover != nil {
			t.Errorf("%s: %v (leftover %q)\nwant exactly: %s", role, err, leftover, line)
		}
	}
}

// TestExampleConfigs: today's example configs (deploy/*.toml) name no
// path the table decides, and each role's loader accepts its own.
func TestExampleConfigs(t *testing.T) {
	for _, role := range layout.Daemons {
		path := filepath.Join("..", "..", "..", "..", "deploy", role+".toml")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if leftover, err := loaders[role](b, path, exampleState); err != nil || leftover != nil {
			t.Errorf("%s: %v (leftover %q)", role, err, leftover)
		}
	}
}

// TestEarlierFirstConfigs: a config bxctl up wrote before the paths left
// the configs holds the table's own paths in its state directory: it
// keeps working, with one line per such key saying to delete it (which
// the daemon logs as a warning and doctor reports). Edited to another
// path, it is refused.
func TestEarlierFirstConfigs(t *testing.T) {
	const s = "/home/o/.boxmaker"
	old := map[string]string{
		layout.Inferproxy: "socket_dir = \"" + s + "/run/infer\"\nupstream = \"127.0.0.1:8080\"\n",
		layout.Loopd: "broker_socket = \"" + s + "/run/broker/broker.sock\"\ninfer_socket = \"" + s + "/run/infer/infer.sock\"\nmemory_socket = \"" + s + "/run/memory/memory.sock\"\n" +
			"socket_dir = \"" + s + "/run/loop\"\nstate_dir = \"" + s + "\"\n\n[model]\nname = \"m\"\n",
		layout.Brokerd: "admin_socket_dir = \"" + s + "/run/admin\"\nbroker_socket_dir = \"" + s + "/run/broker\"\ngate_socket_dir = \"" + s + "/run/gate\"\n" +
			"gateway_socket = \"" + s + "/run/gateway/gateway.sock\"\ngrants_dir = \"" + s + "/grants\"\nmemtool_socket = \"" + s + "/run/memtool/memtool.sock\"\nstate_dir = \"" + s + "\"\n",
		layout.Memoryd: "admin_socket_dir = \"" + s + "/run/memadmin\"\nchat_socket_dir = \"" + s + "/run/memchat\"\ngate_socket = \"" + s + "/run/gate/gate.sock\"\n" +
			"memory_socket_dir = \"" + s + "/run/memory\"\nmemtool_socket_dir = \"" + s + "/run/memtool\"\nstate_dir = \"" + s + "\"\n",
	}
	keys := map[string]int{layout.Inferproxy: 1, layout.Loopd: 5, layout.Brokerd: 7, layout.Memoryd: 6}
	for role, text := range old {
		leftover, err := loaders[role]([]byte(text), role+".toml", s)
		if err != nil || len(leftover) != keys[role] {
			t.Errorf("%s: %v; %d lines to delete, want %d: %q", role, err, len(leftover), keys[role], leftover)
		}
		for _, l := range leftover {
			if !strings.HasPrefix(l, "config "+role+".toml: key ") || !strings.HasSuffix(l, "delete its line; see docs/runbook.md#layout-key-moved") {
				t.Errorf("%s: %q", role, l)
			}
		}
		moved := strings.Replace(text, s+"/run/", "/run/boxmaker/", 1)
		if _, err := loaders[role]([]byte(moved), role+".toml", s); err == nil || !strings.Contains(err.Error(), "is no longer read: the layout table gives") {
			t.Errorf("%s, a path moved: %v", role, err)
		}
	}
}
