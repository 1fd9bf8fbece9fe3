package up

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTrusted: role binaries run in place as root only when bin, each
// directory above it and each binary are root's and writable by no one
// else; a link is judged by what it reaches.
func TestTrusted(t *testing.T) {
	needRoot(t)
	const user = 1000
	for _, c := range []struct {
		name string
		edit func(top, parent, bin string) string // returns the bin to check
		stop string                               // the failing path, relative to top; "" if trusted
	}{
		{"root's", nil, ""},
		{"bin a user's", func(_, _, bin string) string { os.Chown(bin, user, user); return bin }, "p/bin"},
		{"bin group-writable", func(_, _, bin string) string { os.Chmod(bin, 0o775); return bin }, "p/bin"},
		{"a binary a user's", func(_, _, bin string) string { os.Chown(filepath.Join(bin, "brokerd"), user, user); return bin }, "p/bin/brokerd"},
		{"a binary others may write", func(_, _, bin string) string { os.Chmod(filepath.Join(bin, "brokerd"), 0o757); return bin }, "p/bin/brokerd"},
		{"a binary a link", func(_, _, bin string) string {
			os.Remove(filepath.Join(bin, "loopd"))
			os.Symlink(filepath.Join(bin, "brokerd"), filepath.Join(bin, "loopd"))
			return bin
		}, "p/bin/loopd"},
		{"a parent a user's", func(_, parent, bin string) string { os.Chown(parent, user, user); return bin }, "p"},
		// A root-owned sticky parent (as /tmp) cannot lose its root-owned
		// entries to anyone else; a sticky bin could gain a missing role.
		{"a parent root's sticky", func(_, parent, bin string) string { os.Chmod(parent, 0o777|os.ModeSticky); return bin }, ""},
		{"a parent a user's sticky", func(_, parent, bin string) string {
			os.Chmod(parent, 0o777|os.ModeSticky)
			os.Chown(parent, user, user)
			return bin
		}, "p"},
		{"a parent others may write, not sticky", func(_, parent, bin string) string { os.Chmod(parent, 0o777); return bin }, "p"},
		{"bin itself sticky", func(_, _, bin string) string { os.Chmod(bin, 0o777|os.ModeSticky); return bin }, "p/bin"},
		{"a link to a user's directory", func(top, _, bin string) string {
			u := filepath.Join(top, "u")
			os.Mkdir(u, 0o755)
			os.Chown(u, user, user)
			l := filepath.Join(top, "link")
			os.Symlink(u, l)
			return l
		}, "u"},
	} {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			parent := filepath.Join(top, "p")
			bin := filepath.Join(parent, "bin")
			mustDo(t, os.MkdirAll(bin, 0o755))
			mustDo(t, os.Chmod(parent, 0o755))
			for _, n := range []string{"brokerd", "loopd"} {
				mustDo(t, os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"), 0o755))
			}
			check := bin
			if c.edit != nil {
				check = c.edit(top, parent, bin)
			}
			stop, ok := trusted(check, []string{"brokerd", "loopd", "gatewayd"}, top)
			if want := c.stop == ""; ok != want || !ok && stop != filepath.Join(top, c.stop) {
				t.Errorf("trusted = %q, %v; want %v stopping at %s", stop, ok, want, c.stop)
			}
		})
	}
}

// TestRoleBinariesCopiesAUsersClone: as root, a clone a user owns in a
// directory the role users can pass is run from copies in DEV/bin, not in
// place; a role missing from the build has its old copy removed; a
// binary that is a link is refused, not copied.
func TestRoleBinariesCopiesAUsersClone(t *testing.T) {
	needRoot(t)
	top := t.TempDir()
	mustDo(t, os.Chmod(filepath.Dir(top), 0o755)) // the testing package's, 0700
	mustDo(t, os.Chmod(top, 0o755))
	if stop, ok := reachable(top); !ok {
		t.Skipf("%s stops the role users", stop)
	}
	bin := filepath.Join(top, "clone", "bin")
	mustDo(t, os.MkdirAll(bin, 0o755))
	mustDo(t, os.Chmod(filepath.Dir(bin), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(bin, "brokerd"), []byte("brokerd v2"), 0o755))
	mustDo(t, os.Chown(filepath.Dir(bin), 1000, 1000))
	mustDo(t, os.Chown(bin, 1000, 1000))
	dev := filepath.Join(top, "dev")
	mustDo(t, os.MkdirAll(filepath.Join(dev, "bin"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(dev, "bin", "gatewayd"), []byte("stale"), 0o755))
	var out bytes.Buffer
	got, err := roleBinaries(bin, false, []string{"brokerd", "gatewayd"}, dev, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(dev, "bin") || !strings.Contains(out.String(), "someone other than root can change") {
		t.Fatalf("roles run from %s (%q); want copies in %s", got, out.String(), filepath.Join(dev, "bin"))
	}
	if b, _ := os.ReadFile(filepath.Join(got, "brokerd")); string(b) != "brokerd v2" {
		t.Errorf("the copy of brokerd holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(got, "gatewayd")); !os.IsNotExist(err) {
		t.Errorf("the stale gatewayd copy is still there: %v", err)
	}
	secret := filepath.Join(top, "secret")
	mustDo(t, os.WriteFile(secret, []byte("root only"), 0o600))
	mustDo(t, os.Remove(filepath.Join(bin, "brokerd")))
	mustDo(t, os.Symlink(secret, filepath.Join(bin, "brokerd")))
	if _, err := roleBinaries(bin, false, []string{"brokerd"}, dev, io.Discard); err == nil || !strings.Contains(err.Error(), "#up-bin-unreachable") {
		t.Errorf("a binary that is a link: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dev, "bin", "brokerd")); string(b) == "root only" {
		t.Error("root copied the file the link names")
	}
}
