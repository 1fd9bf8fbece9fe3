package nix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/units"
)

// driverOut is what ../shared/reference/nixpkgs/eval-module.nix prints.
type driverOut struct {
	OK               bool               `json:"ok"`
	FailedAssertions []string           `json:"failedAssertions"`
	Services         map[string]service `json:"services"`
}

// runDriver runs the reference's own driver, exactly as its README says,
// from the repository's root, on module (relative to the root), with
// import-from-derivation refused.
func runDriver(t *testing.T, module string) (driverOut, []byte, error) {
	t.Helper()
	bin := nixInstantiate(t)
	reference(t)
	cmd := exec.Command(bin, "--eval", "--strict", "--json", "--option", "allow-import-from-derivation", "false",
		"../shared/reference/nixpkgs/eval-module.nix", "--arg", "lib", "../shared/reference/nixpkgs-lib", "--arg", "module", module)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var d driverOut
	if err == nil {
		if jerr := json.Unmarshal(out, &d); jerr != nil {
			t.Fatalf("eval-module.nix printed %v", jerr)
		}
	}
	return d, stderr.Bytes(), err
}

// unitText is a unit file as section -> key -> values in order.
type unitText map[string]map[string][]string

func parseUnit(t *testing.T, name, text string) unitText {
	t.Helper()
	u := unitText{}
	sec := ""
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			sec = l[1 : len(l)-1]
			u[sec] = map[string][]string{}
		case sec != "" && strings.Contains(l, "="):
			k, v, _ := strings.Cut(l, "=")
			u[sec][k] = append(u[sec][k], v)
		default:
			t.Fatalf("%s: not a unit line: %q", name, l)
		}
	}
	return u
}

// compareUnit: the unit nixpkgs' systemd-lib rendered (nixText, with the
// service's wantedBy) has the same directives with the same values, in
// the same order within each key, as the installer's (inst), but for
// what NixOS itself adds to every service: X-Restart-Triggers= (from
// restartTriggers) and its default PATH (stage2ServiceConfig), both in
// nixos/lib/systemd-lib.nix. systemd reads the keys of a section in any
// order; the order of one key's values matters (an empty value resets).
func compareUnit(t *testing.T, name, nixText string, wantedBy []string, inst string) []string {
	t.Helper()
	var bad []string
	got, want := parseUnit(t, name, nixText), parseUnit(t, name, inst)
	if len(got["Unit"]["X-Restart-Triggers"]) != 1 {
		bad = append(bad, fmt.Sprintf("%s: nixpkgs rendered no X-Restart-Triggers=", name))
	}
	delete(got["Unit"], "X-Restart-Triggers")
	var env []string
	for _, v := range got["Service"]["Environment"] {
		var s string
		if err := json.Unmarshal([]byte(v), &s); err != nil || !strings.HasPrefix(s, "PATH=") {
			env = append(env, v)
		}
	}
	if env == nil {
		delete(got["Service"], "Environment")
	} else {
		got["Service"]["Environment"] = env
	}
	// nixpkgs of 2023 writes no [Install] (wantedBy becomes symlinks); a
	// newer one writes WantedBy=. Either way it is the installer's.
	if gi, ok := got["Install"]; ok {
		if !reflect.DeepEqual(gi, want["Install"]) {
			bad = append(bad, fmt.Sprintf("%s [Install]: nixpkgs %v, installer %v", name, gi, want["Install"]))
		}
		delete(got, "Install")
	} else if !reflect.DeepEqual(wantedBy, want["Install"]["WantedBy"]) {
		bad = append(bad, fmt.Sprintf("%s: wantedBy %v, the installer's WantedBy= %v", name, wantedBy, want["Install"]["WantedBy"]))
	}
	delete(want, "Install")
	for _, sec := range []string{"Unit", "Service"} {
		var diff []string
		for k, w := range want[sec] {
			if g := got[sec][k]; !slices.Equal(g, w) {
				diff = append(diff, fmt.Sprintf("%s: nixpkgs %q, installer %q", k, g, w))
			}
		}
		for k, g := range got[sec] {
			if _, ok := want[sec][k]; !ok {
				diff = append(diff, fmt.Sprintf("%s: nixpkgs %q, installer none", k, g))
			}
		}
		sort.Strings(diff)
		for _, d := range diff {
			bad = append(bad, fmt.Sprintf("%s [%s] %s", name, sec, d))
		}
	}
	if len(got) != len(want) {
		bad = append(bad, fmt.Sprintf("%s: nixpkgs' sections %v, the installer's %v", name, keys(got), keys(want)))
	}
	return bad
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// installed is each unit's text as bxctl install writes it
// (cmd/bxctl/internal/install.UnitFiles: units.Table, Text, Substitute)
// with the module's inputs as values.
func installed(t *testing.T, vals map[string]string, given ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, u := range units.Table(given...) {
		text, err := units.Substitute(u.Text(), vals)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(u.Name, ".service")] = text
	}
	return out
}

// TestNixpkgsDriver: the reference's own driver (nixpkgs' real
// systemd-lib, unit options and types, assertions, users-groups and
// tmpfiles) accepts the module, and every role unit it renders equals
// the installer's, directive for directive; so do our eval.nix's, with
// and without Honcho's key.
func TestNixpkgsDriver(t *testing.T) {
	d, stderr, err := runDriver(t, "modules/boxmaker.nix")
	if err != nil {
		t.Fatalf("nixpkgs refuses the module: %v\n%s", err, stderr)
	}
	if !d.OK || len(d.FailedAssertions) != 0 {
		t.Fatalf("nixpkgs' assertions fail: %q", d.FailedAssertions)
	}
	r := evalModule(t)
	vals := values(t, loadDeployment(t), r)
	for what, c := range map[string]struct {
		services map[string]service
		given    []string
	}{"eval-module.nix": {d.Services, nil}, "eval.nix": {r.Positive.Services, nil}, "eval.nix with Honcho's key": {r.Honcho.Services, []string{units.HonchoKey}}} {
		inst := installed(t, vals, c.given...)
		for name, text := range inst {
			s, ok := c.services[name]
			if !ok {
				t.Errorf("%s: no unit %s", what, name)
				continue
			}
			for _, e := range compareUnit(t, what+": "+name, s.Text, s.WantedBy, text) {
				t.Error(e)
			}
		}
	}
	t.Logf("%d role units rendered by nixpkgs' systemd-lib equal the installer's", len(installed(t, vals)))
}

// oneOf is nixpkgs' checkService: each key it checks with
// assertValueOneOf and the values it allows, read from the file.
func oneOf(t *testing.T) map[string][]string {
	t.Helper()
	nixpkgs, _ := reference(t)
	b, err := os.ReadFile(filepath.Join(nixpkgs, "nixos", "lib", "systemd-unit-options.nix"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range regexp.MustCompile(`assertValueOneOf "(\w+)" \[([^\]]*)\]`).FindAllSubmatch(b, -1) {
		for _, v := range regexp.MustCompile(`"([^"]*)"`).FindAllSubmatch(m[2], -1) {
			out[string(m[1])] = append(out[string(m[1])], string(v[1]))
		}
	}
	if len(out["Type"]) == 0 || len(out["Restart"]) == 0 {
		t.Fatalf("systemd-unit-options.nix has no checkService of Type and Restart: %v", out)
	}
	return out
}

// shapeErrors is each key of s whose value does not have the shape
// nixpkgs and systemd demand: a key nixpkgs' checkService checks is a
// string among its values (assertValueOneOf: `elem` on the raw value, so
// a list is refused); a key systemd repeats (units.Repeatable; ExecStart=
// in a oneshot unit) is a list; every other key is a string.
func shapeErrors(name string, s service, rule map[string][]string) []string {
	var bad []string
	typ := ""
	_ = json.Unmarshal(s.ServiceConfig["Type"], &typ)
	for sec, m := range map[string]map[string]json.RawMessage{"Unit": s.UnitConfig, "Service": s.ServiceConfig} {
		for k, raw := range m {
			var str string
			isString := json.Unmarshal(raw, &str) == nil
			if allowed, checked := rule[k]; checked && sec == "Service" && (!isString || !slices.Contains(allowed, str)) {
				bad = append(bad, fmt.Sprintf("%s [%s] %s = %s: nixpkgs' checkService allows only the strings %q", name, sec, k, raw, allowed))
				continue
			}
			list := units.IsRepeatable(sec, k) || (sec == "Service" && k == "ExecStart" && typ == "oneshot")
			if isString == list {
				bad = append(bad, fmt.Sprintf("%s [%s] %s = %s: want a %s", name, sec, k, raw, map[bool]string{true: "list (systemd repeats it)", false: "string (systemd takes it once)"}[list]))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// TestValueShapes: every key of every unit the module sets has the shape
// nixpkgs' rule and systemd demand (in the driver's and in eval.nix's
// evaluations), and the check catches a planted one-element Type list,
// a Restart= list and a repeated key given as a string.
func TestValueShapes(t *testing.T) {
	rule := oneOf(t)
	d, stderr, err := runDriver(t, "modules/boxmaker.nix")
	if err != nil {
		t.Fatalf("nixpkgs refuses the module: %v\n%s", err, stderr)
	}
	r := evalModule(t)
	n := 0
	for what, svcs := range map[string]map[string]service{"eval-module.nix": d.Services, "eval.nix": r.Positive.Services, "eval.nix (IDs given)": r.IDs.Services} {
		for name, s := range svcs {
			if !strings.HasPrefix(name, "boxmaker-") {
				continue
			}
			n++
			for _, e := range shapeErrors(what+": "+name, s, rule) {
				t.Error(e)
			}
		}
	}
	if n < 2*7 {
		t.Errorf("only %d units checked", n)
	}
	plant := func(what string, f func(s *service)) {
		s := d.Services["boxmaker-loopd"]
		sc := map[string]json.RawMessage{}
		for k, v := range s.ServiceConfig {
			sc[k] = v
		}
		s.ServiceConfig = sc
		f(&s)
		if bad := shapeErrors("planted", s, rule); len(bad) == 0 {
			t.Errorf("%s: not caught", what)
		}
	}
	plant("one-element Type list", func(s *service) { s.ServiceConfig["Type"] = json.RawMessage(`["exec"]`) })
	plant("Restart list", func(s *service) { s.ServiceConfig["Restart"] = json.RawMessage(`["on-failure"]`) })
	plant("Type not among nixpkgs' values", func(s *service) { s.ServiceConfig["Type"] = json.RawMessage(`"sometimes"`) })
	plant("InaccessiblePaths as a string", func(s *service) { s.ServiceConfig["InaccessiblePaths"] = json.RawMessage(`"/x"`) })
	plant("User as a list", func(s *service) { s.ServiceConfig["User"] = json.RawMessage(`["boxmaker-loopd"]`) })
}

// TestNixpkgsRefusesPlantedList: nixpkgs itself (the driver) refuses the
// module with a one-element Type list planted, with nixpkgs' message:
// the bug that stopped nixos-rebuild.
func TestNixpkgsRefusesPlantedList(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{`systemd.services.boxmaker-loopd.serviceConfig.Type = lib.mkForce [ "exec" ];`, "Systemd Service field `Type' cannot have value `exec'"},
		{`systemd.services.boxmaker-config.serviceConfig.Restart = [ "on-failure" ];`, "Systemd Service field `Restart' cannot have value `on-failure'"},
	} {
		f := filepath.Join(t.TempDir(), "planted.nix")
		writeFile(t, f, fmt.Sprintf("{ lib, ... }: {\n  imports = [ %s ];\n  %s\n}\n", filepath.Join(root, "modules", "boxmaker.nix"), c.set))
		_, stderr, err := runDriver(t, f)
		if err == nil || !strings.Contains(string(stderr), c.want) {
			t.Errorf("%s: nixpkgs did not refuse it with %q: %v\n%s", c.set, c.want, err, stderr)
		}
	}
}

// TestCompareUnitCatchesDifference: the comparison fails on a value
// missing, an extra key, a changed value and values of one key reordered.
func TestCompareUnitCatchesDifference(t *testing.T) {
	inst := "[Unit]\nDescription=d\n\n[Service]\nType=exec\nSystemCallFilter=@system-service\nSystemCallFilter=~@privileged\nInaccessiblePaths=-/a\nInaccessiblePaths=-/b\n\n[Install]\nWantedBy=multi-user.target\n"
	nix := "[Unit]\nDescription=d\nX-Restart-Triggers=/nix/store/x\n\n[Service]\nEnvironment=\"PATH=/nix/store/y/bin\"\n%s\n"
	ok := "InaccessiblePaths=-/a\nInaccessiblePaths=-/b\nSystemCallFilter=@system-service\nSystemCallFilter=~@privileged\nType=exec"
	wb := []string{"multi-user.target"}
	for name, svc := range map[string]string{
		"a value missing": strings.Replace(ok, "InaccessiblePaths=-/b\n", "", 1),
		"an extra key":    ok + "\nPrivateUsers=yes",
		"a changed value": strings.Replace(ok, "Type=exec", "Type=simple", 1),
		"values reordered": strings.Replace(ok, "SystemCallFilter=@system-service\nSystemCallFilter=~@privileged",
			"SystemCallFilter=~@privileged\nSystemCallFilter=@system-service", 1),
		"an environment variable": ok + "\nEnvironment=\"TOKEN=x\"",
	} {
		if len(compareUnit(t, name, fmt.Sprintf(nix, svc), wb, inst)) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
	if bad := compareUnit(t, "equal", fmt.Sprintf(nix, ok), wb, inst); len(bad) != 0 {
		t.Errorf("equal units differ: %q", bad)
	}
}
