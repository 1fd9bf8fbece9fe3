package nix

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nixFiles lists every .nix file in the repository.
func nixFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == ".boxmaker" || p == filepath.Join(root, "vendor")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".nix") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParse: every .nix file parses (nix-instantiate --parse), and the
// flake's parts exist.
func TestParse(t *testing.T) {
	bin := nixInstantiate(t)
	files := nixFiles(t)
	for _, want := range []string{"flake.nix", "modules/boxmaker.nix", "nix/default.nix", "images/default.nix", "checks/nix/eval.nix"} {
		found := false
		for _, f := range files {
			found = found || f == filepath.Join(root, want)
		}
		if !found {
			t.Errorf("%s is missing", want)
		}
	}
	for _, f := range files {
		if out, err := exec.Command(bin, "--parse", f).CombinedOutput(); err != nil {
			rel, _ := filepath.Rel(root, f)
			t.Errorf("%s does not parse: %v\n%s", rel, err, out)
		}
	}
}

// TestParseCatchesSyntaxError: the parse check fails on a broken file.
func TestParseCatchesSyntaxError(t *testing.T) {
	bin := nixInstantiate(t)
	f := filepath.Join(t.TempDir(), "bad.nix")
	writeFile(t, f, "{ a = 1; b = ; }\n")
	if err := exec.Command(bin, "--parse", f).Run(); err == nil {
		t.Fatal("nix-instantiate --parse accepted a syntax error")
	}
}
