package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/first"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
)

// stateOf is the state directory of a config at STATE/config/ROLE.toml.
func stateOf(p string) string { return filepath.Dir(filepath.Dir(p)) }

// gatewayText is a gatewayd.toml its loader accepts, with token as its
// token setting (its paths are state's: no key names them).
func gatewayText(_, token string) string {
	return "url = \"https://chat.example.ts.net\"\ntoken = " + token + "\n\n[allow]\nusers = [\"8d5qj1c3kpgz5e9fxw7ty4bn3h\"]\n"
}

const honchoTable = "\n[honcho]\nurl = \"https://honcho.example.ts.net\"\npeer = \"agent\"\ntrusted_workspace = \"host1-trusted\"\nuntrusted_workspace = \"host1-untrusted\"\n"

// TestConfigJudgedByItsRole (issue 31: each daemon-refused config is a
// doctor problem, a case per daemon): each daemon's config is judged by that
// daemon's own loader (package roleconf/<role>), so a config the daemon
// refuses to start on is a doctor-config problem naming the file, and
// the same file with the fault removed is read. Each case is checked
// against the role's Load too, the very call the daemon makes at start.
func TestConfigJudgedByItsRole(t *testing.T) {
	for _, c := range []struct {
		role, good, bad, want string
		load                  func(path string) error
	}{
		{"memoryd", honchoTable + "key = \"credential:honcho-key\"\n",
			honchoTable + "key = \"eyJhbGciOiJIUzI1NiJ9.eyJ0IjoxfQ.c2lnbmF0dXJl\"\n", "looks like a Honcho key itself",
			func(p string) error { _, _, err := memoryd.Load(p, stateOf(p)); return err }},
		{"memoryd", honchoTable, honchoTable + "timeout_ms = 1\n", "timeout_ms",
			func(p string) error { _, _, err := memoryd.Load(p, stateOf(p)); return err }},
		{"inferproxy", "", "max_conns = -1\n", "max_conns must not be negative",
			func(p string) error { _, _, err := inferproxy.Load(p, stateOf(p)); return err }},
		{"gatewayd", "", "", "looks like a Mattermost token itself",
			func(p string) error { _, _, err := gatewayd.Load(p, stateOf(p)); return err }},
		{"loopd", "\n[jobs]\ntiering = \"off\"\n", "\n[jobs]\ntiering = \"weekly\"\n", "jobs.tiering",
			func(p string) error { _, _, err := loopd.Load(p, stateOf(p)); return err }},
		{"loopd", "\n[selftest]\nskip = [\"tool-call\"]\n", "\n[selftest]\nskip = [\"server\"]\n", `"server" is not a check that may be skipped`,
			func(p string) error { _, _, err := loopd.Load(p, stateOf(p)); return err }},
		{"brokerd", "\n[secrets]\nGITHUB = \"env:X\"\n", "\n[secrets]\ngithub = \"env:X\"\n", "uppercase",
			func(p string) error { _, _, err := brokerd.Load(p, stateOf(p)); return err }},
		{"brokerd", "\n[runner]\npodman_socket = \"/run/p.sock\"\ntool_image = \"sha256:" + strings.Repeat("a", 64) + "\"\n",
			"\n[runner]\npodman_socket = \"/run/p.sock\"\ntool_image = \"localhost/tool:latest\"\n", "must be an image ID",
			func(p string) error { _, _, err := brokerd.Load(p, stateOf(p)); return err }},
		{"brokerd", "\n[consult]\nendpoint = \"https://api.example.com/v1\"\n", "\n[consult]\nendpoint = \"https://api.example.com/v1\"\ntemperature_milli = 700\n", "temperature_milli 700",
			func(p string) error { _, _, err := brokerd.Load(p, stateOf(p)); return err }},
	} {
		t.Run(c.role+" "+c.want, func(t *testing.T) {
			state := t.TempDir()
			os.MkdirAll(layout.Config.In(state), 0o700)
			p := first.Params{State: state, Llama: "127.0.0.1:8080", Model: "m"}
			for _, fc := range first.Configs {
				os.WriteFile(fc.Path(state), []byte(fc.Text(p)), 0o600)
			}
			path := layout.ConfigPath(state, c.role)
			base, _ := os.ReadFile(path)
			good, bad := string(base)+c.good, string(base)+c.bad
			if c.role == "gatewayd" {
				good, bad = gatewayText(state, `"credential:mattermost-token"`), gatewayText(state, `"credential:abcdefghijklmnopqrstuvwx12"`)
			}
			for _, text := range []string{good, bad} {
				refused := text == bad
				os.WriteFile(path, []byte(text), 0o600)
				if err := c.load(path); (err != nil) != refused {
					t.Fatalf("%s's own Load = %v on the %s text; the case is wrong:\n%s", c.role, err, map[bool]string{true: "bad", false: "good"}[refused], text)
				}
				in, err := readInstall(state)
				if err != nil {
					t.Fatal(err)
				}
				a := &auditor{}
				a.configs(in)
				f := a.findings[0]
				name := filepath.Base(path)
				switch {
				case refused && (f.Severity != Problem || !strings.Contains(f.Message, name) || !strings.Contains(f.Message, c.want)):
					t.Errorf("a %s the daemon refuses: doctor-config %s %q; want a problem naming %s and %q", name, f.Severity, f.Message, name, c.want)
				case !refused && f.Severity != OK:
					t.Errorf("a %s the daemon accepts: doctor-config %s %q", name, f.Severity, f.Message)
				}
			}
		})
	}
}

// TestRetiredPeerKeys: a config written before the peer uid lists left
// the configs (issue 25: the layout table decides them) is refused by
// its role's own Load and by doctor with one line naming the key to
// delete, never read with the key ignored.
func TestRetiredPeerKeys(t *testing.T) {
	loads := map[string]func(string) error{
		"inferproxy": func(p string) error { _, _, err := inferproxy.Load(p, stateOf(p)); return err },
		"loopd":      func(p string) error { _, _, err := loopd.Load(p, stateOf(p)); return err },
		"brokerd":    func(p string) error { _, _, err := brokerd.Load(p, stateOf(p)); return err },
		"memoryd":    func(p string) error { _, _, err := memoryd.Load(p, stateOf(p)); return err },
		"gatewayd":   func(p string) error { _, _, err := gatewayd.Load(p, stateOf(p)); return err },
	}
	for _, c := range []struct{ role, key string }{
		{"inferproxy", "allow_uids"}, {"loopd", "allow_uids"}, {"gatewayd", "allow_uids"},
		{"brokerd", "broker_allow_uids"}, {"brokerd", "admin_allow_uids"}, {"brokerd", "gate_allow_uids"}, {"brokerd", "gateway_allow_uids"},
		{"memoryd", "memory_allow_uids"}, {"memoryd", "memtool_allow_uids"}, {"memoryd", "admin_allow_uids"}, {"memoryd", "gate_listener_uids"},
	} {
		state := t.TempDir()
		os.MkdirAll(layout.Config.In(state), 0o700)
		p := first.Params{State: state, Llama: "127.0.0.1:8080", Model: "m"}
		for _, fc := range first.Configs {
			os.WriteFile(fc.Path(state), []byte(fc.Text(p)), 0o600)
		}
		path := layout.ConfigPath(state, c.role)
		base, _ := os.ReadFile(path)
		if c.role == "gatewayd" {
			base = []byte(gatewayText(state, `"credential:mattermost-token"`))
		}
		// As yesterday's deploy/*.toml wrote it: an empty list, top level.
		os.WriteFile(path, append([]byte(c.key+" = []\n"), base...), 0o600)
		want := "key " + c.key + " is no longer read; delete its line"
		if err := loads[c.role](path); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "see docs/runbook.md#layout-accept") {
			t.Errorf("%s with %s: the role's Load = %v, want %q and its runbook entry", c.role, c.key, err, want)
		}
		in, err := readInstall(state)
		if err != nil {
			t.Fatal(err)
		}
		a := &auditor{}
		a.configs(in)
		if f := a.findings[0]; f.Severity != Problem || !strings.Contains(f.Message, want) {
			t.Errorf("%s with %s: doctor-config %s %q, want a problem saying %q", c.role, c.key, f.Severity, f.Message, want)
		}
	}
}
