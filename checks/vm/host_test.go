package vm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// These tests need no VM: they check the parts of the harness that decide
// what the guest is built from and how its answers are read.

func TestSourcesKeepsOnlyDebian12(t *testing.T) {
	// Through bash, not a /usr/bin/env shebang (the Nix sandbox has none).
	out, err := exec.Command("bash", "./sources.sh", "testdata/apt/one.list", "testdata/apt/two.sources").CombinedOutput()
	if err != nil {
		t.Fatalf("sources.sh: %v: %s", err, out)
	}
	want, err := os.ReadFile("testdata/apt/want.sources")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(want) {
		t.Errorf("sources.sh = \n%s\nwant\n%s", out, want)
	}
}

func TestGate(t *testing.T) {
	for _, tc := range []struct {
		name, vm, ci, missing string
		skip, fail            bool
	}{
		{name: "not asked for", skip: true},
		{name: "not asked for, in CI, nothing installed", ci: "1", missing: "not root", skip: true},
		{name: "asked for, ready", vm: "1"},
		{name: "asked for, machine lacks qemu", vm: "1", missing: "qemu-system-x86_64 is not installed", skip: true},
		{name: "asked for in CI, machine lacks qemu", vm: "1", ci: "true", missing: "qemu-system-x86_64 is not installed", fail: true},
		{name: "asked for in CI, ready", vm: "1", ci: "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"BOXMAKER_VM": tc.vm, "CI": tc.ci}
			skip, fail := gate(func(k string) string { return env[k] }, tc.missing)
			if (skip != "") != tc.skip || (fail != "") != tc.fail {
				t.Fatalf("gate = skip %q, fail %q; want skip %v, fail %v", skip, fail, tc.skip, tc.fail)
			}
			for _, line := range []string{skip, fail} {
				if strings.Contains(line, "\n") {
					t.Errorf("gate's line %q is not one line", line)
				}
				if tc.vm == "1" && tc.missing != "" && line != "" && !strings.Contains(line, tc.missing) {
					t.Errorf("gate's line %q does not say what is missing (%s)", line, tc.missing)
				}
			}
		})
	}
}

func TestCacheKeyFollowsInputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	key := func() string {
		k, err := hashInputs(dir, "packages.txt", "guest")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write("packages.txt", "systemd\n", 0o644)
	write("guest/etc/hostname", "boxvm\n", 0o644)
	write("unrelated", "x", 0o644)
	seen := map[string]string{key(): "first"}
	for _, step := range []struct {
		name string
		do   func()
	}{
		{"a package added", func() { write("packages.txt", "systemd\nuidmap\n", 0o644) }},
		{"a guest file changed", func() { write("guest/etc/hostname", "other\n", 0o644) }},
		{"a guest file's mode changed", func() { write("guest/etc/hostname", "other\n", 0o755) }},
		{"a guest file added", func() { write("guest/etc/motd", "", 0o644) }},
	} {
		step.do()
		k := key()
		if prev, ok := seen[k]; ok {
			t.Errorf("after %s the key is the same as after %s", step.name, prev)
		}
		seen[k] = step.name
	}
	before := key()
	write("unrelated", "y", 0o644)
	if key() != before {
		t.Error("a file outside the inputs changed the key")
	}
}

func TestParseExposure(t *testing.T) {
	out := "  NAME                 DESCRIPTION        EXPOSURE\n" +
		"✗ PrivateNetwork=     Service has access to the host's network  0.5\n" +
		"\n→ Overall exposure level for bx-hardened.service: 1.2 OK 🙂\n"
	e, err := ParseExposure(out, "bx-hardened.service")
	if err != nil || e.Tenths != 12 || e.Rating != "OK" {
		t.Errorf("ParseExposure = %v, %v, want 1.2 OK", e, err)
	}
	if e, err := ParseExposure("-> Overall exposure level for a.service: 10.0 UNSAFE\n", "a.service"); err != nil || e.Tenths != 100 {
		t.Errorf("ParseExposure of an ASCII arrow = %v, %v, want 10.0", e, err)
	}
	for _, bad := range []string{
		"",
		"→ Overall exposure level for other.service: 1.2 OK\n",
		"→ Overall exposure level for a.service: 11.0 UNSAFE\n",
		"→ Overall exposure level for a.service: 1 OK\n",
		"→ Overall exposure level for a.service: 1.2 OK\n→ Overall exposure level for a.service: 9.9 UNSAFE\n",
	} {
		if e, err := ParseExposure(bad, "a.service"); err == nil {
			t.Errorf("ParseExposure(%q) = %v, want an error", bad, e)
		}
	}
}

// FuzzParseExposure: whatever systemd-analyze printed, a parsed level is
// in range and renders back to a line that parses to itself.
func FuzzParseExposure(f *testing.F) {
	f.Add("→ Overall exposure level for a.service: 1.2 OK 🙂\n")
	f.Add("Overall exposure level for a.service: 9.6 UNSAFE\n")
	f.Fuzz(func(t *testing.T, out string) {
		e, err := ParseExposure(out, "a.service")
		if err != nil {
			return
		}
		if e.Tenths < 0 || e.Tenths > 100 || e.Unit != "a.service" {
			t.Fatalf("ParseExposure(%q) = %+v", out, e)
		}
		again, err := ParseExposure("→ Overall exposure level for "+e.String()+"\n", "a.service")
		if err != nil || again != e {
			t.Fatalf("round trip of %+v = %+v, %v", e, again, err)
		}
		if !strings.Contains(out, "a.service") {
			t.Fatalf("parsed %+v from output without the unit's name", e)
		}
	})
}
