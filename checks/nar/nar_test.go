package nar

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes a small tree with every kind a NAR holds.
func tree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vendor")
	for _, f := range []struct {
		path, body string
		mode       os.FileMode
	}{
		{"modules.txt", "# example.com/a v1.0.0\n", 0o644},
		{"b/x.go", "package b\n", 0o444},
		{"b/run.sh", "#!/bin/sh\n", 0o755},
		{"a/empty", "", 0o644},
		{"B/upper", "sorted before a", 0o644},
		{"a/seven", "1234567", 0o644},
	} {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../modules.txt", filepath.Join(dir, "b", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "c", "empty-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDumpMatchesNix: the NAR is byte for byte nix-store --dump's, and the
// hash is nix-hash's. Nix is installed by checks/setup; without it the
// test says so.
func TestDumpMatchesNix(t *testing.T) {
	dir := tree(t)
	var got bytes.Buffer
	if err := Dump(&got, dir); err != nil {
		t.Fatal(err)
	}
	bin, err := exec.LookPath("nix-store")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nix-store is missing: checks/setup installs it; see docs/runbook.md#nix-missing")
		}
		t.Skip("did not run: nix-store is missing (checks/setup installs Debian's nix-bin)")
	}
	want, err := exec.Command(bin, "--dump", dir).Output()
	if err != nil {
		t.Fatalf("nix-store --dump: %v", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("the NAR differs from nix-store --dump's (%d bytes, nix %d)", got.Len(), len(want))
	}
	sri, err := Hash(dir)
	if err != nil {
		t.Fatal(err)
	}
	// nix-hash (Nix 2.8) prints base16; the SRI form is its base64.
	nixHex, err := exec.Command("nix-hash", "--type", "sha256", dir).Output()
	if err != nil {
		t.Fatalf("nix-hash: %v", err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(nixHex)))
	if err != nil {
		t.Fatalf("nix-hash printed %q", nixHex)
	}
	if want := "sha256-" + base64.StdEncoding.EncodeToString(raw); sri != want {
		t.Fatalf("hash %s, nix-hash says %s", sri, want)
	}
}

// TestHashSeesEveryChange: contents, the executable bit, a name and a link
// target each change the hash.
func TestHashSeesEveryChange(t *testing.T) {
	base := func() (string, string) {
		dir := tree(t)
		h, err := Hash(dir)
		if err != nil {
			t.Fatal(err)
		}
		return dir, h
	}
	for name, change := range map[string]func(dir string) error{
		"contents":   func(d string) error { return os.WriteFile(filepath.Join(d, "a/seven"), []byte("1234568"), 0o644) },
		"executable": func(d string) error { return os.Chmod(filepath.Join(d, "b/x.go"), 0o555) },
		"name":       func(d string) error { return os.Rename(filepath.Join(d, "a/empty"), filepath.Join(d, "a/empty2")) },
		"link": func(d string) error {
			os.Remove(filepath.Join(d, "b/link"))
			return os.Symlink("modules.txt", filepath.Join(d, "b/link"))
		},
	} {
		dir, before := base()
		if err := change(dir); err != nil {
			t.Fatal(err)
		}
		after, err := Hash(dir)
		if err != nil {
			t.Fatal(err)
		}
		if after == before {
			t.Errorf("%s: the hash did not change", name)
		}
	}
	// A mode bit other than executable does not.
	dir, before := base()
	os.Chmod(filepath.Join(dir, "modules.txt"), 0o600)
	if after, _ := Hash(dir); after != before {
		t.Error("a non-executable mode bit changed the hash")
	}
}
