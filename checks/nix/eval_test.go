package nix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

func loadDeployment(t *testing.T) units.Deployment {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "modules", "deployment.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d units.Deployment
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("modules/deployment.json: %v", err)
	}
	return d
}

// evalOut is checks/nix/eval.nix's answer.
type evalOut struct {
	Positive evalCase `json:"positive"`
	// Honcho is the positive case with Honcho's key given and named.
	Honcho evalCase `json:"honcho"`
	// Bare is the positive case without Honcho: memoryd has no settings,
	// and its first config sets no key (its paths are the layout table's).
	Bare evalCase `json:"bare"`
	// IDs is the positive case with the images' IDs given, not files.
	IDs    evalCase `json:"ids"`
	Inputs struct {
		Podman              string            `json:"podman"`
		Images              map[string]string `json:"images"`
		IDFiles             map[string]string `json:"idFiles"`
		Roots               map[string]string `json:"roots"`
		Credentials         map[string]string `json:"credentials"`
		LlamaServer         string            `json:"llamaServer"`
		Model               string            `json:"model"`
		MattermostAddresses []string          `json:"mattermostAddresses"`
		HonchoAddresses     []string          `json:"honchoAddresses"`
	} `json:"inputs"`
	Negatives []struct {
		Name     string   `json:"name"`
		Anchor   string   `json:"anchor"`
		Refused  bool     `json:"refused"`
		How      string   `json:"how"`
		Messages []string `json:"messages"`
	} `json:"negatives"`
}

// service is one systemd.services entry: each unitConfig and
// serviceConfig value as nixpkgs holds it (a string, or a list for a key
// systemd repeats), and its text as nixpkgs' systemd-lib renders it.
type service struct {
	UnitConfig      map[string]json.RawMessage `json:"unitConfig"`
	ServiceConfig   map[string]json.RawMessage `json:"serviceConfig"`
	WantedBy        []string                   `json:"wantedBy"`
	RequiredBy      []string                   `json:"requiredBy"`
	Environment     map[string]string          `json:"environment"`
	RestartTriggers []string                   `json:"restartTriggers"`
	Text            string                     `json:"text"`
}

// lists is a section's values, a string as a list of one.
func lists(t *testing.T, sec map[string]json.RawMessage) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for k, raw := range sec {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out[k] = []string{s}
			continue
		}
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("%s = %s is neither a string nor a list of strings", k, raw)
		}
		out[k] = l
	}
	return out
}

// evalCase is what the module sets in one positive case.
type evalCase struct {
	Failed   []string           `json:"failed"`
	Services map[string]service `json:"services"`
	Users    map[string]struct {
		UID          uint32 `json:"uid"`
		IsSystemUser bool   `json:"isSystemUser"`
		Group        string `json:"group"`
		Home         string `json:"home"`
		CreateHome   bool   `json:"createHome"`
		Linger       *bool  `json:"linger"`
		SubUIDRanges []struct {
			StartUID uint32 `json:"startUid"`
			Count    uint32 `json:"count"`
		} `json:"subUidRanges"`
		SubGIDRanges []struct {
			StartGID uint32 `json:"startGid"`
			Count    uint32 `json:"count"`
		} `json:"subGidRanges"`
	} `json:"users"`
	Groups map[string]struct {
		GID uint32 `json:"gid"`
	} `json:"groups"`
	Tmpfiles []string                  `json:"tmpfiles"`
	Podman   bool                      `json:"podman"`
	Settings map[string]map[string]any `json:"settings"`
}

func evalNix(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin := nixInstantiate(t)
	nixpkgs, lib := reference(t)
	cmd := exec.Command(bin, append([]string{"--eval", "--strict", "--json", "--option", "allow-import-from-derivation", "false",
		filepath.Join(root, "checks", "nix", "eval.nix"), "--argstr", "libPath", lib, "--argstr", "nixpkgs", nixpkgs}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.Bytes(), err
	}
	return out, nil
}

func evalModule(t *testing.T) evalOut {
	t.Helper()
	out, err := evalNix(t)
	if err != nil {
		t.Fatalf("the module does not evaluate: %v\n%s", err, out)
	}
	var r evalOut
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("eval.nix answered %v", err)
	}
	return r
}

// TestModuleEval: the module evaluates with every option forced and no
// assertion failing, and each negative case is refused for its reason.
func TestModuleEval(t *testing.T) {
	r := evalModule(t)
	if len(r.Positive.Failed) != 0 {
		t.Errorf("assertions failed on the positive case: %q", r.Positive.Failed)
	}
	if len(r.IDs.Failed) != 0 {
		t.Errorf("assertions failed on the positive case with the images' IDs given: %q", r.IDs.Failed)
	}
	if len(r.Bare.Failed) != 0 {
		t.Errorf("assertions failed on the positive case without Honcho (memoryd's config empty): %q", r.Bare.Failed)
	}
	if len(r.Honcho.Failed) != 0 {
		t.Errorf("assertions failed on the positive case with Honcho's key: %q", r.Honcho.Failed)
	}
	if !r.Positive.Podman {
		t.Error("virtualisation.podman.enable is not set")
	}
	if len(r.Negatives) < 20 {
		t.Fatalf("only %d negative cases", len(r.Negatives))
	}
	// The text each refusal by type must show, so that it is refused for
	// its own reason and not another.
	typeErrors := map[string]string{
		"credential as a Nix path":      "services.boxmaker.credentials.mattermost-token",
		"relative credential":           "services.boxmaker.credentials.mattermost-token",
		"relative honcho key":           "services.boxmaker.credentials.honcho-key",
		"image by tag":                  "services.boxmaker.images.tool.id",
		"one-element Type list":         "Systemd Service field `Type' cannot have value `exec'",
		"one-element Restart list":      "Systemd Service field `Restart' cannot have value `on-failure'",
		"Type list added to the string": "Systemd Service field `Type' cannot have value `exec'",
		"misspelled option":             "services.boxmaker.setings",
		"bad Restart":                   "Systemd Service field `Restart' cannot have value `sometimes'",
		"addresses as one string":       "services.boxmaker.mattermostAddresses",
	}
	for _, n := range r.Negatives {
		if !n.Refused {
			t.Errorf("negative case %q was not refused (%s): %q", n.Name, n.How, n.Messages)
			continue
		}
		t.Logf("refused: %s (%s)", n.Name, n.How)
		if n.Anchor != "type" {
			for _, m := range n.Messages {
				if !strings.Contains(m, "see docs/runbook.md#") {
					t.Errorf("%q: the refusal names no runbook entry: %s", n.Name, m)
				}
			}
			continue
		}
		want, ok := typeErrors[n.Name]
		if !ok {
			t.Errorf("negative case %q: no expected error text", n.Name)
			continue
		}
		msg, err := evalNix(t, "--argstr", "only", n.Name)
		if err == nil || !strings.Contains(string(msg), want) {
			t.Errorf("negative case %q: error does not name %s: %v\n%s", n.Name, want, err, msg)
		}
	}
}

// values is every placeholder's value for the module's inputs, made as
// bxctl install's Values makes it (cmd/bxctl/internal/install), with the
// module's store paths where the installer has its unpacked images.
func values(t *testing.T, d units.Deployment, r evalOut) map[string]string {
	t.Helper()
	in := r.Inputs
	host, _, err := net.SplitHostPort(in.LlamaServer)
	if err != nil || net.ParseIP(host) == nil {
		t.Fatalf("the positive case's llamaServer %q is not ip:port", in.LlamaServer)
	}
	v := map[string]string{
		units.Podman:                 in.Podman,
		units.State:                  d.StateDir,
		units.ConfigDir:              layout.Config.In(d.StateDir),
		units.Net(layout.Inferproxy): host,
		units.Net(layout.Gatewayd):   strings.Join(in.MattermostAddresses, " "),
		units.Net(layout.Memoryd):    strings.Join(in.HonchoAddresses, " "),
	}
	for role, id := range in.Images {
		v[units.Image(role)] = id
	}
	for role, p := range in.Roots {
		v[units.Root(role)] = p
	}
	v[units.Bin(layout.Brokerd)] = in.Roots[layout.Brokerd] + "/bin/" + layout.Brokerd
	for name, p := range in.Credentials {
		v[units.CredentialPath(name)] = p
	}
	// What bxctl install hands first.Configs as Params (pkg/host/roleconf/first).
	v[units.Llama], v[units.Model] = in.LlamaServer, in.Model
	return v
}

// TestModuleMatchesDeployment: the module's units, users, groups and
// tmpfiles rules equal deployment.json after the substitution bxctl
// install makes (pkg/host/units.Substitute, which fails on a placeholder left
// without a value), and its own units are the config writer and the
// tool image's loader into brokerd's Podman, nothing else.
func TestModuleMatchesDeployment(t *testing.T) {
	d := loadDeployment(t)
	r := evalModule(t)
	vals := values(t, d, r)
	sub := func(s string) string {
		out, err := units.Substitute(s, vals)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return out
	}
	subst := func(sec map[string][]string) map[string][]string {
		out := map[string][]string{}
		for k, vs := range sec {
			for _, v := range vs {
				out[k] = append(out[k], sub(v))
			}
		}
		return out
	}
	orEmpty := func(v []string) []string {
		if v == nil {
			return []string{}
		}
		return v
	}
	var roleUnits []string
	for _, u := range d.Units {
		roleUnits = append(roleUnits, u.Name)
		name := strings.TrimSuffix(u.Name, ".service")
		got, ok := r.Positive.Services[name]
		if !ok {
			t.Errorf("the module has no unit %s", u.Name)
			continue
		}
		// nixpkgs' own unitConfig module (systemd-lib.nix) adds
		// X-Restart-Triggers= from restartTriggers.
		g := lists(t, got.UnitConfig)
		if len(g["X-Restart-Triggers"]) != 1 {
			t.Errorf("%s: nixpkgs wrote no X-Restart-Triggers=: %v", u.Name, g)
		}
		delete(g, "X-Restart-Triggers")
		if w := subst(u.Sections["Unit"]); !reflect.DeepEqual(g, w) {
			t.Errorf("%s [Unit]:\n got %v\nwant %v", u.Name, g, w)
		}
		if g, w := lists(t, got.ServiceConfig), subst(u.Sections["Service"]); !reflect.DeepEqual(g, w) {
			t.Errorf("%s [Service]:\n got %v\nwant %v", u.Name, g, w)
		}
		if w := orEmpty(u.Sections["Install"]["WantedBy"]); !reflect.DeepEqual(got.WantedBy, w) {
			t.Errorf("%s WantedBy: got %v, want %v", u.Name, got.WantedBy, w)
		}
		// Restarted when its config or users.toml changes: one trigger
		// per file boxmaker-config writes for it.
		if want := len(d.Files) + 1; len(got.RestartTriggers) != want {
			t.Errorf("%s: %d restart triggers %v, want %d (its config and users.toml)", u.Name, len(got.RestartTriggers), got.RestartTriggers, want)
		}
		// The one variable is nixpkgs' own default PATH
		// (systemd-lib.nix stage2ServiceConfig: coreutils, findutils,
		// grep, sed, systemd), no secret and nothing of the module's.
		for k := range got.Environment {
			if k != "PATH" {
				t.Errorf("%s: the module sets environment %s", u.Name, k)
			}
		}
		for k := range u.Sections["Install"] {
			if k != "WantedBy" && k != "RequiredBy" {
				t.Errorf("%s: [Install] %s is not mapped by the module", u.Name, k)
			}
		}
	}

	// With Honcho's key given, every role's [Service] is pkg/host/units'
	// table with that optional credential given (memoryd's unit loads
	// it, from the path given; no other unit changes).
	for _, u := range units.Table(units.HonchoKey) {
		got, ok := r.Honcho.Services[strings.TrimSuffix(u.Name, ".service")]
		if !ok {
			t.Errorf("the module with Honcho's key has no unit %s", u.Name)
			continue
		}
		want := map[string][]string{}
		for _, s := range u.Sections {
			if s.Name == "Service" {
				for _, k := range s.Keys {
					want[k.Name] = append([]string{}, k.Values...)
				}
			}
		}
		if g, w := lists(t, got.ServiceConfig), subst(want); !reflect.DeepEqual(g, w) {
			t.Errorf("%s [Service] with Honcho's key:\n got %v\nwant %v", u.Name, g, w)
		}
	}
	load := lists(t, r.Honcho.Services[strings.TrimSuffix(units.UnitName(layout.Memoryd), ".service")].ServiceConfig)["LoadCredentialEncrypted"]
	if want := []string{units.HonchoKey + ":" + r.Inputs.Credentials[units.HonchoKey]}; !reflect.DeepEqual(load, want) {
		t.Errorf("memoryd with Honcho's key: LoadCredentialEncrypted=%q, want %q", load, want)
	}
	if load := lists(t, r.Positive.Services[strings.TrimSuffix(units.UnitName(layout.Memoryd), ".service")].ServiceConfig)["LoadCredentialEncrypted"]; load != nil {
		t.Errorf("memoryd without Honcho's key: LoadCredentialEncrypted=%q, want none", load)
	}

	// The module's own units: the config writer and one loader per image
	// without a user (the tool image), into brokerd's rootless Podman.
	var broker units.User
	for _, u := range d.Users {
		if u.Role == layout.Brokerd {
			broker = u
		}
	}
	own := map[string]bool{"boxmaker-config": true}
	for _, img := range d.Images {
		if img.Role != units.Tool {
			continue
		}
		own[img.Name+"-image"] = true
		// The ID read from the image's ID file when the unit runs, or
		// the one given.
		for c, id := range map[*evalCase]string{&r.Positive: "--id-file " + r.Inputs.IDFiles[img.Role], &r.IDs: "--id " + r.Inputs.Images[img.Role]} {
			l, ok := c.Services[img.Name+"-image"]
			if !ok {
				t.Errorf("no loader unit for image %s", img.Name)
				continue
			}
			sc := lists(t, l.ServiceConfig)
			if !reflect.DeepEqual(sc["User"], []string{broker.Name}) || l.Environment["HOME"] != broker.Home ||
				len(sc["ExecStart"]) != 1 || !strings.Contains(sc["ExecStart"][0], "/bin/boxmaker-load-image ") ||
				!strings.HasSuffix(sc["ExecStart"][0], " "+id) ||
				!reflect.DeepEqual(l.RequiredBy, []string{units.UnitName(layout.Brokerd)}) {
				t.Errorf("%s-image does not load the image (%s) into %s's Podman before brokerd: %+v", img.Name, id, broker.Name, l)
			}
		}
	}
	for name := range r.Positive.Services {
		if strings.HasPrefix(name+".service", "boxmaker-") && !own[name] && !slices.Contains(roleUnits, name+".service") {
			t.Errorf("the module has a unit %s that is neither the deployment's nor its own config writer or tool loader", name)
		}
	}
	cw := r.Positive.Services["boxmaker-config"]
	if !reflect.DeepEqual(cw.RequiredBy, roleUnits) {
		t.Errorf("boxmaker-config is required by %v, want every role's unit %v", cw.RequiredBy, roleUnits)
	}
	exec := strings.Join(lists(t, cw.ServiceConfig)["ExecStart"], "\n")
	for _, f := range d.Files {
		want := fmt.Sprintf("/bin/boxmaker-install-config %s %s %s ", f.Mode, f.Owner, f.Group)
		if !strings.Contains(exec, want) || !strings.Contains(exec, " "+sub(f.Path)) {
			t.Errorf("boxmaker-config does not write %s (%s): %s", f.Path, want, exec)
		}
	}
	for _, c := range d.Configs {
		want := fmt.Sprintf("/bin/boxmaker-install-config %s %s %s ", c.Mode, c.Owner, c.Group)
		if path := sub(c.Path); strings.Contains(exec, path) && !strings.Contains(exec, want) {
			t.Errorf("boxmaker-config writes %s without the layout's mode and owners (%s): %s", path, want, exec)
		}
	}

	// Each role's settings hold its first config (deployment.json's text,
	// substituted) under whatever the owner added.
	for _, c := range d.Configs {
		role := strings.TrimSuffix(filepath.Base(c.Path), ".toml")
		if c.Text == "" {
			continue
		}
		var first map[string]any
		if _, err := toml.Decode(sub(c.Text), &first); err != nil {
			t.Fatalf("first config of %s: %v", role, err)
		}
		got := r.IDs.Settings[role]
		for k, want := range first {
			if !reflect.DeepEqual(fmt.Sprint(got[k]), fmt.Sprint(want)) {
				t.Errorf("settings.%s.%s = %v, want the first config's %v", role, k, got[k], want)
			}
		}
		if !strings.Contains(exec, " "+sub(c.Path)) {
			t.Errorf("boxmaker-config does not write %s", sub(c.Path))
		}
	}

	// Without the IDs given, brokerd's tool_image stays a placeholder
	// that boxmaker-install-config fills from the tool image's ID file
	// when boxmaker-config runs (no image is built to evaluate).
	if ti := fmt.Sprint(r.Positive.Settings[layout.Brokerd]["runner"]); !strings.Contains(ti, "tool_image:"+units.Image(units.Tool)) {
		t.Errorf("settings.brokerd.runner = %s, want tool_image %s", ti, units.Image(units.Tool))
	}
	if want := sub(layout.Config.In(d.StateDir)) + "/brokerd.toml tool=" + r.Inputs.IDFiles[units.Tool]; !strings.Contains(exec, want+"\n") {
		t.Errorf("boxmaker-config does not fill brokerd.toml's tool image from its ID file (%s): %s", want, exec)
	}

	ours := 0
	for name := range r.Positive.Users {
		if strings.HasPrefix(name, "boxmaker-") {
			ours++
		}
	}
	for name := range r.Positive.Groups {
		if strings.HasPrefix(name, "boxmaker-") {
			ours++
		}
	}
	if ours != 2*len(d.Users) {
		t.Errorf("the module makes %d boxmaker- users and groups, deployment.json has %d users", ours, len(d.Users))
	}
	for _, u := range d.Users {
		got, ok := r.Positive.Users[u.Name]
		if !ok {
			t.Errorf("no user %s", u.Name)
			continue
		}
		ranges := 0
		if u.SubUIDCount > 0 {
			ranges = 1
		}
		if got.UID != u.UID || !got.IsSystemUser || got.Group != u.Name || got.Home != u.Home || got.CreateHome != u.CreateHome ||
			got.Linger == nil || *got.Linger != u.Linger || len(got.SubUIDRanges) != ranges || len(got.SubGIDRanges) != ranges {
			t.Errorf("user %s: got %+v, want %+v", u.Name, got, u)
			continue
		}
		if ranges == 1 && (got.SubUIDRanges[0].StartUID != u.SubUIDStart || got.SubUIDRanges[0].Count != u.SubUIDCount ||
			got.SubGIDRanges[0].StartGID != u.SubUIDStart || got.SubGIDRanges[0].Count != u.SubUIDCount) {
			t.Errorf("user %s: subordinate ranges %+v %+v, want %d+%d", u.Name, got.SubUIDRanges, got.SubGIDRanges, u.SubUIDStart, u.SubUIDCount)
		}
		if g := r.Positive.Groups[u.Name]; g.GID != u.GID {
			t.Errorf("group %s: gid %d, want %d", u.Name, g.GID, u.GID)
		}
	}
	var wantTmp []string
	for _, l := range d.Tmpfiles {
		wantTmp = append(wantTmp, sub(l))
	}
	// nixpkgs' tmpfiles.nix adds its own rules (/run/lock, /nix/var...).
	var gotTmp []string
	for _, l := range r.Positive.Tmpfiles {
		if strings.Contains(l, d.StateDir) {
			gotTmp = append(gotTmp, l)
		}
	}
	if !reflect.DeepEqual(gotTmp, wantTmp) {
		t.Errorf("tmpfiles:\n got %q\nwant %q", gotTmp, wantTmp)
	}
	t.Logf("%d role units (+%d of the module's own), %d users, %d groups, %d tmpfiles rules, %d files", len(d.Units), len(own), len(r.Positive.Users), len(r.Positive.Groups), len(r.Positive.Tmpfiles), len(d.Files))
}
