// Package nix holds the offline checks of the flake's parts (docs/nix.md):
// every .nix file parses, the NixOS module evaluates under nixpkgs' lib with
// its negative cases refused, the module's units, users and tmpfiles equal
// modules/deployment.json after substitution, and the vendorHash recorded in
// nix/vendor-hash.json is the NAR hash of `go mod vendor` of the current
// go.sum.
//
// Invariant: a check that cannot run here says so in one line (a skip), and
// fails instead when CI is set for what CI's setup installs (nix-instantiate);
// the evaluation under nixpkgs' lib runs only where BOXMAKER_NIXPKGS_LIB names
// a nixpkgs.lib tree, which a fresh CI machine does not have.
package nix

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// root is the repository's top level.
var root = func() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..")
}()

// nixInstantiate finds nix-instantiate, or ends the test: a failure when CI
// is set (checks/setup installs it), a one-line skip otherwise.
func nixInstantiate(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("nix-instantiate")
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nix-instantiate is missing: checks/setup installs it (Debian's nix-bin); see docs/runbook.md#nix-missing")
	}
	t.Skip("did not run: nix-instantiate is missing (checks/setup installs Debian's nix-bin)")
	return ""
}
