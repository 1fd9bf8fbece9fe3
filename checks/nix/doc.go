// Package nix holds the offline checks of the flake's parts (docs/nix.md):
// every .nix file parses; the NixOS module evaluates against nixpkgs' own
// files (../shared/reference/nixpkgs: systemd-lib, systemd-unit-options,
// systemd-types, assertions, users-groups, tmpfiles, with nixpkgs' lib from
// ../shared/reference/nixpkgs-lib), both through our checks/nix/eval.nix with
// its negative cases refused and through the reference's own driver
// (eval-module.nix); every unit nixpkgs' systemd-lib renders equals, directive
// for directive, the unit bxctl install writes; every serviceConfig key has
// the value shape nixpkgs' checkService and systemd demand; the module
// evaluates with import-from-derivation refused; the vendorHash recorded in
// nix/vendor-hash.json is the NAR hash of `go mod vendor` of the current
// go.sum; and the gate derivation's check phase passes in an approximation of
// the Nix sandbox (checks/nix/sandbox).
//
// Invariant: a check that cannot run here says so in one line (a skip), and
// fails instead when CI is set for what CI has (nix-instantiate, which
// checks/setup installs, and ../shared beside the clone); under -short, or in
// the Nix sandbox where neither exists, they skip. A test that fails only in
// that sandbox: see docs/runbook.md#nix-sandbox.
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

// reference is ../shared/reference beside the repository (nixpkgs' files
// and lib), absolute; or ends the test: a failure when CI is set (CI has
// ../shared beside the clone), a one-line skip otherwise (the Nix
// sandbox has only the repository).
func reference(t *testing.T) (nixpkgs, lib string) {
	t.Helper()
	ref := filepath.Join(root, "..", "shared", "reference")
	nixpkgs, lib = filepath.Join(ref, "nixpkgs"), filepath.Join(ref, "nixpkgs-lib")
	for _, p := range []string{filepath.Join(nixpkgs, "eval-module.nix"), filepath.Join(lib, "lib", "default.nix")} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%v: CI has ../shared/reference beside the clone (nixpkgs' files and lib); see docs/runbook.md#nix-lib-missing", err)
			}
			t.Skipf("did not run: %v (../shared/reference holds nixpkgs' files and lib)", err)
		}
	}
	return nixpkgs, lib
}
