package nix

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"wntrmute.dev/boxmaker/checks/nar"
)

var update = flag.Bool("update", false, "rewrite nix/vendor-hash.json from go.mod, go.sum and go mod vendor")

// vendorRecord is nix/vendor-hash.json: the vendorHash every buildGoModule
// uses, and the go.mod and go.sum it was computed from.
type vendorRecord struct {
	GoMod      string `json:"goMod"`      // sha256 hex of go.mod
	GoSum      string `json:"goSum"`      // sha256 hex of go.sum
	VendorHash string `json:"vendorHash"` // SRI sha256 of the NAR of go mod vendor's output
}

func fileSHA256(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// vendorHash runs go mod vendor into a scratch directory from the module
// cache (offline: GOPROXY=off) and hashes its NAR, as buildGoModule's
// goModules derivation does with outputHashMode = "recursive".
func vendorHash(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "vendor")
	cmd := exec.Command("go", "mod", "vendor", "-o", out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod vendor (offline, from the module cache): %v\n%s\nsee docs/runbook.md#nix-vendor-hash", err, b)
	}
	h, err := nar.Hash(out)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestVendorHash: nix/vendor-hash.json was updated together with go.mod
// and go.sum, and its vendorHash is the NAR hash of go mod vendor's output.
// `go test ./checks/nix -run TestVendorHash -update` rewrites it
// (docs/nix.md, "vendorHash").
func TestVendorHash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod vendor (about 55 MB)")
	}
	if _, err := os.Stat(filepath.Join(root, "vendor")); err == nil {
		// The flake's gate derivation builds from buildGoModule's vendor/,
		// whose fixed-output hash Nix itself has just checked.
		t.Skip("did not run: the tree has a vendor/ directory (the Nix gate), which Nix checked against vendorHash")
	}
	path := filepath.Join(root, "nix", "vendor-hash.json")
	got := vendorRecord{GoMod: fileSHA256(t, "go.mod"), GoSum: fileSHA256(t, "go.sum"), VendorHash: vendorHash(t)}
	if *update {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec vendorRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("nix/vendor-hash.json: %v", err)
	}
	if rec.GoMod != got.GoMod || rec.GoSum != got.GoSum {
		t.Errorf("go.mod or go.sum changed without nix/vendor-hash.json (recorded go.mod %.12s go.sum %.12s, now %.12s %.12s); run go test ./checks/nix -run TestVendorHash -update; see docs/runbook.md#nix-vendor-hash", rec.GoMod, rec.GoSum, got.GoMod, got.GoSum)
	}
	if rec.VendorHash != got.VendorHash {
		t.Errorf("vendorHash is %s, go mod vendor's NAR hash is %s; run go test ./checks/nix -run TestVendorHash -update; see docs/runbook.md#nix-vendor-hash", rec.VendorHash, got.VendorHash)
	}
}
