package arch

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
)

// roleConfigs is each role's config type: the one struct that decodes
// config/<role>.toml (issue 25: a role's config type is declared once).
var roleConfigs = map[string]reflect.Type{
	"inferproxy": reflect.TypeFor[inferproxy.Config](),
	"loopd":      reflect.TypeFor[loopd.Config](),
	"brokerd":    reflect.TypeFor[brokerd.Config](),
	"memoryd":    reflect.TypeFor[memoryd.Config](),
	"gatewayd":   reflect.TypeFor[gatewayd.Config](),
}

// TestRoleConfigsDeclaredOnce: every daemon of the layout table has its
// config type in pkg/host/roleconf/<role>, and no other struct in the
// tree decodes a config (ConfigSchemas).
func TestRoleConfigsDeclaredOnce(t *testing.T) {
	for _, role := range layout.Daemons {
		typ, ok := roleConfigs[role]
		if !ok {
			t.Errorf("%s has no config type listed here", role)
			continue
		}
		if want := "wntrmute.dev/boxmaker/" + ConfigHome + "/" + role; typ.PkgPath() != want || typ.Name() != "Config" {
			t.Errorf("%s's config type is %s.%s, want %s.Config", role, typ.PkgPath(), typ.Name(), want)
		}
	}
	for role := range roleConfigs {
		if !slices.Contains(layout.Daemons, role) {
			t.Errorf("%s is listed but is no daemon of the layout table", role)
		}
	}
	report(t, ConfigSchemas(root))
}

// TestPlantedConfigTwin: doctor's shadow of loopd.toml, bxctl's own
// read of brokerd.toml's [runner] (a struct without tags, decoded
// loosely) and a strict decode of a role's config outside its package
// are each caught; the role's own type and a grant file's schema are not.
func TestPlantedConfigTwin(t *testing.T) {
	dir := plant(t, map[string]string{
		"pkg/host/roleconf/loopd/config.go": "package loopd\n\ntype Config struct {\n\tStateDir string `toml:\"state_dir\"`\n}\n",
		"pkg/tool/grant/grant.go":           "package grant\n\ntype Spec struct {\n\tID string `toml:\"id\"`\n}\n",
		"cmd/bxctl/internal/doctor/install.go": "package doctor\n\nimport \"github.com/BurntSushi/toml\"\n\n" +
			"type loopCfg struct {\n\tStateDir string `json:\"s\" toml:\"state_dir\"`\n\tModel struct {\n\t\tName string `toml:\"name\"`\n\t} `toml:\"model\"`\n}\n\n" +
			"func read(b string) (c loopCfg) { var raw map[string]any; toml.Decode(b, &raw); return c }\n",
		"cmd/bxctl/internal/up/podman.go": "package up\n\nimport t \"github.com/BurntSushi/toml\"\n\n" +
			"func hasRunner(p string) bool {\n\tvar c struct{ Runner *struct{} }\n\t_, err := t.DecodeFile(p, &c)\n\treturn err == nil && c.Runner != nil\n}\n",
		"cmd/bxctl/internal/status/status.go": "package status\n\nimport \"example.com/m/pkg/host/config\"\n\n" +
			"type upstream struct{ Upstream string }\n\nfunc read(b []byte) (u upstream) { config.Decode(b, \"x\", &u); return }\n",
	})
	got := ConfigSchemas(dir)
	expect(t, got, "cmd/bxctl/internal/doctor/install.go:5: a struct with TOML keys (state_dir, model)")
	expect(t, got, "cmd/bxctl/internal/doctor/install.go:7: a struct with TOML keys (name)")
	expect(t, got, "cmd/bxctl/internal/up/podman.go:7: toml.DecodeFile outside arch.Decoders")
	expect(t, got, "cmd/bxctl/internal/status/status.go:7: config.Decode outside pkg/host/roleconf")
	if len(got) != 4 {
		t.Errorf("want exactly the four twins (doctor-egress's map decode is listed in Decoders; the role's own type and the grant schema are at home), got:\n%s", strings.Join(got, "\n"))
	}
}
