package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadRefusesFilesOthersCanWrite: a config anyone else can write, or
// that sits in a directory others can write, or that links to another
// user's file, is refused before it is read (issue 13 item 1).
func TestLoadRefusesFilesOthersCanWrite(t *testing.T) {
	write := func(t *testing.T, path string, mode os.FileMode) string {
		t.Helper()
		if err := os.WriteFile(path, []byte("socket = \"s\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	mkdir := func(t *testing.T, path string, mode os.FileMode) string {
		t.Helper()
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tt := range []struct {
		name string
		make func(t *testing.T) string
		want string
		root bool
	}{
		{name: "file writable by everyone", want: "is writable by everyone (mode 0666)", make: func(t *testing.T) string {
			return write(t, filepath.Join(t.TempDir(), "r.toml"), 0o666)
		}},
		{name: "directory writable by everyone", want: "(on its path) is writable by everyone (mode 0777)", make: func(t *testing.T) string {
			d := mkdir(t, filepath.Join(t.TempDir(), "config"), 0o777)
			return write(t, filepath.Join(d, "r.toml"), 0o644)
		}},
		{name: "parent writable by its group", want: "(on its path) is writable by its group (mode 0770)", make: func(t *testing.T) string {
			p := mkdir(t, filepath.Join(t.TempDir(), "etc"), 0o770)
			d := mkdir(t, filepath.Join(p, "boxmaker"), 0o755)
			return write(t, filepath.Join(d, "r.toml"), 0o644)
		}},
		{name: "link to a stranger's file", root: true, want: "is owned by uid 4242", make: func(t *testing.T) string {
			dir := t.TempDir()
			target := write(t, filepath.Join(dir, "theirs.toml"), 0o644)
			if err := os.Chown(target, 4242, -1); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "r.toml")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Getuid() != 0 {
				t.Skip("giving a file to another uid needs root")
			}
			path := tt.make(t)
			var r role
			err := Load(path, &r)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasSuffix(err.Error(), "see docs/runbook.md#owner-file-unsafe") {
				t.Fatalf("Load(%s) = %v, want a refusal containing %q", path, err, tt.want)
			}
			if r.Socket != "" {
				t.Fatalf("Load filled v on a refusal: %+v", r)
			}
		})
	}
}
