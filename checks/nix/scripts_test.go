package nix

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bash runs one of the module's scripts (modules/*.sh) as the unit does
// (the module prepends PATH and PODMAN), through bash on PATH and never a
// shebang (the Nix sandbox has no /usr/bin/env).
func bash(t *testing.T, script string, env []string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("did not run: no bash on PATH")
	}
	cmd := exec.Command(bin, append([]string{filepath.Join(root, "modules", script)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const testID = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestInstallConfig: boxmaker-install-config puts the image ID read from
// the ID file into the config when the unit runs, and refuses (writing
// nothing) an ID file that holds no image ID or a placeholder left
// without one.
func TestInstallConfig(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "brokerd.toml")
	writeFile(t, src, "[runner]\ntool_image = \"@image:tool@\"\n")
	good, bad := filepath.Join(dir, "good-id"), filepath.Join(dir, "bad-id")
	writeFile(t, good, testID+"\n")
	writeFile(t, bad, "localhost/boxmaker-tool:latest\n")
	uid, gid := fmt.Sprint(os.Getuid()), fmt.Sprint(os.Getgid())

	dest := filepath.Join(dir, "out.toml")
	if out, err := bash(t, "install-config.sh", nil, "0640", uid, gid, src, dest, "tool="+good); err != nil {
		t.Fatalf("install-config: %v\n%s", err, out)
	}
	b, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if want := "tool_image = \"" + testID + "\""; !strings.Contains(string(b), want) {
		t.Errorf("installed %q, want %s", b, want)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}

	for name, args := range map[string][]string{
		"not an image ID":      {"tool=" + bad},
		"no ID file for it":    nil,
		"ID file missing":      {"tool=" + filepath.Join(dir, "none")},
		"a truncated image ID": {"tool=" + func() string { p := filepath.Join(dir, "short"); writeFile(t, p, testID[:20]); return p }()},
	} {
		dest := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".toml")
		out, err := bash(t, "install-config.sh", nil, append([]string{"0640", uid, gid, src, dest}, args...)...)
		if err == nil {
			t.Errorf("%s: installed", name)
		}
		if _, serr := os.Stat(dest); serr == nil {
			t.Errorf("%s: wrote %s", name, dest)
		}
		if name != "ID file missing" && !strings.Contains(out, "see docs/runbook.md#nix-image-id") {
			t.Errorf("%s: the refusal names no runbook entry: %s", name, out)
		}
	}
}

// TestLoadImage: boxmaker-load-image runs the stream into Podman's load
// and checks the ID (given or read from the ID file) is then there; an
// ID that is no image ID stops it before anything is loaded, and an
// image Podman lacks after the load fails it.
func TestLoadImage(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "podman.log")
	stream := filepath.Join(dir, "stream")
	writeFile(t, stream, "#!/bin/sh\necho IMAGE-TAR\n")
	// A stand-in for podman: load records its stdin; image exists
	// answers for testID only (podman image exists: exit 0 or 1).
	podman := filepath.Join(dir, "podman")
	writeFile(t, podman, "#!/bin/sh\ncase \"$1 $2\" in\n\"load \") cat >> "+log+" ;;\n\"image exists\") [ \"$3\" = \""+testID+"\" ] ;;\n*) exit 125 ;;\nesac\n")
	for _, p := range []string{stream, podman} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("did not run: no /bin/sh for the stand-in scripts")
	}
	env := []string{"PODMAN=" + podman}
	idFile := filepath.Join(dir, "id")
	writeFile(t, idFile, testID+"\n")
	for _, args := range [][]string{{"--id", testID}, {"--id-file", idFile}} {
		if out, err := bash(t, "load-image.sh", env, append([]string{stream}, args...)...); err != nil {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	if b, _ := os.ReadFile(log); string(b) != "IMAGE-TAR\nIMAGE-TAR\n" {
		t.Errorf("podman load read %q", b)
	}
	other := "sha256:" + strings.Repeat("f", 64)
	for name, args := range map[string][]string{
		"a tag":             {"--id", "localhost/boxmaker-tool:latest"},
		"absent after load": {"--id", other},
		"bad usage":         {"--id"},
	} {
		if out, err := bash(t, "load-image.sh", env, append([]string{stream}, args...)...); err == nil {
			t.Errorf("%s: accepted\n%s", name, out)
		}
	}
}
