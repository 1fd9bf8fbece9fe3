package nix

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// deployment is modules/deployment.json's schema (the contract between the
// deployment generator and the module).
type deployment struct {
	Version  int    `json:"version"`
	StateDir string `json:"stateDir"`
	Users    []struct {
		Role        string `json:"role"`
		Name        string `json:"name"`
		UID         int    `json:"uid"`
		GID         int    `json:"gid"`
		SubUIDStart int    `json:"subUidStart"`
		SubUIDCount int    `json:"subUidCount"`
		Linger      bool   `json:"linger"`
	} `json:"users"`
	Tmpfiles    []string `json:"tmpfiles"`
	Credentials []struct {
		Role string `json:"role"`
		Name string `json:"name"`
		Doc  string `json:"doc"`
	} `json:"credentials"`
	Images []struct {
		Role   string `json:"role"`
		Name   string `json:"name"`
		Binary string `json:"binary"`
	} `json:"images"`
	Units []struct {
		Name        string                         `json:"name"`
		Role        string                         `json:"role"`
		ExposureMax float64                        `json:"exposureMax"`
		Sections    map[string]map[string][]string `json:"sections"`
	} `json:"units"`
}

func loadDeployment(t *testing.T) deployment {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "modules", "deployment.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d deployment
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("modules/deployment.json: %v", err)
	}
	return d
}

// evalOut is checks/nix/eval.nix's answer.
type evalOut struct {
	Positive struct {
		Failed   []string `json:"failed"`
		Services map[string]struct {
			UnitConfig    map[string][]string `json:"unitConfig"`
			ServiceConfig map[string][]string `json:"serviceConfig"`
			WantedBy      []string            `json:"wantedBy"`
			RequiredBy    []string            `json:"requiredBy"`
			Environment   map[string]string   `json:"environment"`
		} `json:"services"`
		Users map[string]struct {
			UID          int    `json:"uid"`
			IsSystemUser bool   `json:"isSystemUser"`
			Group        string `json:"group"`
			Linger       *bool  `json:"linger"`
			SubUIDRanges []struct {
				StartUID int `json:"startUid"`
				Count    int `json:"count"`
			} `json:"subUidRanges"`
			SubGIDRanges []struct {
				StartGID int `json:"startGid"`
				Count    int `json:"count"`
			} `json:"subGidRanges"`
		} `json:"users"`
		Groups map[string]struct {
			GID int `json:"gid"`
		} `json:"groups"`
		Tmpfiles []string `json:"tmpfiles"`
		Podman   bool     `json:"podman"`
	} `json:"positive"`
	Substitutions struct {
		Podman      string            `json:"podman"`
		Config      string            `json:"config"`
		Images      map[string]string `json:"images"`
		Binaries    map[string]string `json:"binaries"`
		Credentials map[string]string `json:"credentials"`
	} `json:"substitutions"`
	Negatives []struct {
		Name     string   `json:"name"`
		Anchor   string   `json:"anchor"`
		Refused  bool     `json:"refused"`
		How      string   `json:"how"`
		Messages []string `json:"messages"`
	} `json:"negatives"`
}

// nixpkgsLib is the nixpkgs.lib tree BOXMAKER_NIXPKGS_LIB names, or ends
// the test with one line saying the evaluation did not run.
func nixpkgsLib(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BOXMAKER_NIXPKGS_LIB")
	if dir == "" {
		t.Skip("module evaluation did not run: BOXMAKER_NIXPKGS_LIB names no nixpkgs.lib tree (docs/nix.md says how to get one)")
	}
	if _, err := os.Stat(filepath.Join(dir, "lib", "default.nix")); err != nil {
		t.Fatalf("BOXMAKER_NIXPKGS_LIB=%s holds no lib/default.nix: %v; see docs/runbook.md#nix-lib-missing", dir, err)
	}
	return dir
}

func evalNix(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin := nixInstantiate(t)
	lib := nixpkgsLib(t)
	cmd := exec.Command(bin, append([]string{"--eval", "--strict", "--json", filepath.Join(root, "checks", "nix", "eval.nix"), "--argstr", "libPath", lib}, args...)...)
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
	if !r.Positive.Podman {
		t.Error("virtualisation.podman.enable is not set")
	}
	if len(r.Negatives) < 10 {
		t.Fatalf("only %d negative cases", len(r.Negatives))
	}
	// The text each refusal by type must show, so that it is refused for
	// its own reason and not another.
	typeErrors := map[string]string{
		"credential as a Nix path": "services.boxmaker.credentials.mattermost-token",
		"relative credential":      "services.boxmaker.credentials.mattermost-token",
		"image by tag":             "services.boxmaker.images.loopd.id",
		"misspelled option":        "services.boxmaker.setings",
		"bad Restart":              "serviceConfig",
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

// TestModuleMatchesDeployment: the module's units, users, groups and
// tmpfiles rules equal deployment.json after substitution.
func TestModuleMatchesDeployment(t *testing.T) {
	d := loadDeployment(t)
	r := evalModule(t)
	s := r.Substitutions
	pairs := []string{"@podman@", s.Podman, "@state@", d.StateDir, "@config@", s.Config}
	for role, id := range s.Images {
		pairs = append(pairs, "@image:"+role+"@", id)
	}
	for name, p := range s.Binaries {
		pairs = append(pairs, "@bin:"+name+"@", p)
	}
	rep := strings.NewReplacer(pairs...)
	subst := func(sec map[string][]string) map[string][]string {
		out := map[string][]string{}
		for k, vs := range sec {
			for _, v := range vs {
				out[k] = append(out[k], rep.Replace(v))
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
	for _, u := range d.Units {
		name := strings.TrimSuffix(u.Name, ".service")
		got, ok := r.Positive.Services[name]
		if !ok {
			t.Errorf("the module has no unit %s", u.Name)
			continue
		}
		wantSvc := subst(u.Sections["Service"])
		for _, c := range d.Credentials {
			if p, ok := s.Credentials[c.Name]; ok && c.Role == u.Role {
				wantSvc["LoadCredentialEncrypted"] = append(wantSvc["LoadCredentialEncrypted"], c.Name+":"+p)
			}
		}
		if w := subst(u.Sections["Unit"]); !reflect.DeepEqual(got.UnitConfig, w) {
			t.Errorf("%s [Unit]:\n got %v\nwant %v", u.Name, got.UnitConfig, w)
		}
		if !reflect.DeepEqual(got.ServiceConfig, wantSvc) {
			t.Errorf("%s [Service]:\n got %v\nwant %v", u.Name, got.ServiceConfig, wantSvc)
		}
		if w := orEmpty(u.Sections["Install"]["WantedBy"]); !reflect.DeepEqual(got.WantedBy, w) {
			t.Errorf("%s WantedBy: got %v, want %v", u.Name, got.WantedBy, w)
		}
		for k := range u.Sections["Install"] {
			if k != "WantedBy" && k != "RequiredBy" {
				t.Errorf("%s: [Install] %s is not mapped by the module", u.Name, k)
			}
		}
	}
	// The module's own units are one image loader per image, nothing else.
	if want := len(d.Units) + len(d.Images); len(r.Positive.Services) != want {
		t.Errorf("the module has %d boxmaker units, want %d (the deployment's and one loader per image)", len(r.Positive.Services), want)
	}
	for _, img := range d.Images {
		l, ok := r.Positive.Services[img.Name+"-image"]
		if !ok {
			t.Errorf("no loader unit for image %s", img.Name)
			continue
		}
		if !strings.Contains(strings.Join(l.ServiceConfig["ExecStart"], " "), s.Images[img.Role]) {
			t.Errorf("%s-image does not check image ID %s", img.Name, s.Images[img.Role])
		}
	}
	if len(r.Positive.Users) != len(d.Users) || len(r.Positive.Groups) != len(d.Users) {
		t.Errorf("the module makes %d users and %d groups, deployment.json has %d", len(r.Positive.Users), len(r.Positive.Groups), len(d.Users))
	}
	for _, u := range d.Users {
		got, ok := r.Positive.Users[u.Name]
		if !ok {
			t.Errorf("no user %s", u.Name)
			continue
		}
		if got.UID != u.UID || !got.IsSystemUser || got.Group != u.Name || got.Linger == nil || *got.Linger != u.Linger ||
			len(got.SubUIDRanges) != 1 || got.SubUIDRanges[0].StartUID != u.SubUIDStart || got.SubUIDRanges[0].Count != u.SubUIDCount ||
			len(got.SubGIDRanges) != 1 || got.SubGIDRanges[0].StartGID != u.SubUIDStart || got.SubGIDRanges[0].Count != u.SubUIDCount {
			t.Errorf("user %s: got %+v, want %+v", u.Name, got, u)
		}
		if g := r.Positive.Groups[u.Name]; g.GID != u.GID {
			t.Errorf("group %s: gid %d, want %d", u.Name, g.GID, u.GID)
		}
	}
	var wantTmp []string
	for _, l := range d.Tmpfiles {
		wantTmp = append(wantTmp, rep.Replace(l))
	}
	if !reflect.DeepEqual(r.Positive.Tmpfiles, wantTmp) {
		t.Errorf("tmpfiles:\n got %q\nwant %q", r.Positive.Tmpfiles, wantTmp)
	}
}
