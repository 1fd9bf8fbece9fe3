package nix

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/units"
)

// ifdEval evaluates checks/nix/ifd.nix (the module with its defaults,
// every build a real derivation) with import-from-derivation refused, in
// read-write mode so that a build Nix is asked for is refused for that
// reason and no other.
func ifdEval(t *testing.T, plant bool) ([]byte, error) {
	t.Helper()
	bin := nixInstantiate(t)
	nixpkgs, lib := reference(t)
	args := []string{"--eval", "--read-write-mode", "--strict", "--json", "--option", "allow-import-from-derivation", "false",
		filepath.Join(root, "checks", "nix", "ifd.nix"), "--argstr", "libPath", lib, "--argstr", "nixpkgs", nixpkgs}
	if plant {
		args = append(args, "--arg", "plant", "true")
	}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.Bytes(), err
	}
	return out, nil
}

// TestNoImportFromDerivation: the module with its defaults (package,
// roots and images from the system's pkgs) evaluates, every unit
// rendered, without building anything; its units take the roots and the
// tool image's ID file as store paths; and the module's former way (the
// image ID read from a build at evaluation) is refused.
func TestNoImportFromDerivation(t *testing.T) {
	out, err := ifdEval(t, false)
	if err != nil {
		t.Fatalf("the module needs a build to evaluate: %v\n%s", err, out)
	}
	var r struct {
		Failed []string          `json:"failed"`
		Units  map[string]string `json:"units"`
		Roots  map[string]string `json:"roots"`
		Images map[string]struct {
			IDFile string `json:"idFile"`
		} `json:"images"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Failed) != 0 {
		t.Errorf("assertions failed: %q", r.Failed)
	}
	loopd := r.Units[strings.TrimSuffix(units.UnitName("loopd"), ".service")]
	if root := r.Roots["loopd"]; !strings.HasSuffix(root, "-boxmaker-loopd-root") || !strings.Contains(loopd, "RootDirectory="+root+"\n") {
		t.Errorf("loopd's unit does not run in its root %s:\n%s", root, loopd)
	}
	idFile := r.Images[units.Tool].IDFile
	if !strings.HasSuffix(idFile, "-stream-boxmaker-tool-id") || !strings.Contains(r.Units["boxmaker-tool-image"], "--id-file "+idFile+"\n") ||
		!strings.Contains(r.Units["boxmaker-config"], "brokerd.toml tool="+idFile+"\n") {
		t.Errorf("the tool image's ID is not read from its ID file %s when the units run:\n%s\n%s", idFile, r.Units["boxmaker-tool-image"], r.Units["boxmaker-config"])
	}

	msg, err := ifdEval(t, true)
	if err == nil || !strings.Contains(string(msg), "because the option 'allow-import-from-derivation' is disabled") {
		t.Errorf("the image ID read from a build at evaluation was not refused as import-from-derivation: %v\n%s", err, msg)
	}
}
