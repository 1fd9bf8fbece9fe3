package grant

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
)

// TestLoadDirRefusesGrantsOthersCanWrite: each grant an attack run got
// brokerd to accept (issue 13 item 1) now makes the whole set invalid,
// with the reason naming what failed.
func TestLoadDirRefusesGrantsOthersCanWrite(t *testing.T) {
	for _, tt := range []struct {
		name string
		root bool
		// make builds a grant directory and returns it and the path
		// the problem must name as failing.
		make func(t *testing.T) (dir, at string)
		want string
	}{
		{name: "link to another uid's file", root: true, want: "is owned by uid 4242", make: func(t *testing.T) (string, string) {
			theirs := writeDir(t, map[string]string{"evil.toml": grantText("evil")})
			target := filepath.Join(theirs, "evil.toml")
			if err := os.Chown(target, 4242, -1); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.Symlink(target, filepath.Join(dir, "evil.toml")); err != nil {
				t.Fatal(err)
			}
			return dir, target
		}},
		{name: "grant file writable by everyone", want: "is writable by everyone (mode 0666)", make: func(t *testing.T) (string, string) {
			dir := writeDir(t, map[string]string{"g.toml": grantText("g")})
			f := filepath.Join(dir, "g.toml")
			if err := os.Chmod(f, 0o666); err != nil {
				t.Fatal(err)
			}
			return dir, f
		}},
		{name: "grant directory writable by everyone", want: "is writable by everyone (mode 0777)", make: func(t *testing.T) (string, string) {
			dir := writeDir(t, map[string]string{"g.toml": grantText("g")})
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			return dir, dir
		}},
		{name: "parent writable by its group", want: "is writable by its group (mode 0775)", make: func(t *testing.T) (string, string) {
			parent := filepath.Join(t.TempDir(), "etc")
			dir := filepath.Join(parent, "grants")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "g.toml"), []byte(grantText("g")), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(parent, 0o775); err != nil {
				t.Fatal(err)
			}
			return dir, parent
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Getuid() != 0 {
				t.Skip("giving a file to another uid needs root")
			}
			dir, at := tt.make(t)
			set, err := LoadDir(dir, ownership.Self())
			var le *LoadError
			if set != nil || !errors.As(err, &le) {
				t.Fatalf("LoadDir = %v, %v; want no set and a *LoadError", set, err)
			}
			p := le.Problems[0]
			if named := p.File == at || strings.HasPrefix(p.Reason, at); !named || !strings.Contains(p.Reason, tt.want) || !strings.Contains(p.Reason, "see docs/runbook.md#owner-file-unsafe") {
				t.Fatalf("problem = %q, want %s named with %q", p, at, tt.want)
			}
			if !strings.Contains(err.Error(), "see docs/runbook.md#grants-invalid") {
				t.Fatalf("LoadDir error = %v, want the grants-invalid entry", err)
			}
		})
	}
}

// TestLoadDirOwnerUID: with an owner named, a grant that only brokerd's
// own uid (not the owner, not root) could have written is refused.
func TestLoadDirOwnerUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving a file to another uid needs root")
	}
	dir := writeDir(t, map[string]string{"g.toml": grantText("g")})
	for _, p := range []string{dir, filepath.Join(dir, "g.toml")} {
		if err := os.Chown(p, 1000, -1); err != nil {
			t.Fatal(err)
		}
	}
	if set, err := LoadDir(dir, ownership.Trust(1000)); err != nil || set.Len() != 1 {
		t.Fatalf("LoadDir(owner 1000's grants, owner 1000) = %v, %v", set, err)
	}
	if set, err := LoadDir(dir, ownership.Trust(1001)); set != nil || err == nil || !strings.Contains(err.Error(), "owned by uid 1000, who is not root or uid 1001") {
		t.Fatalf("LoadDir(owner 1000's grants, owner 1001) = %v, %v; want refused", set, err)
	}
}
