// Package roletest makes test directories the role users can pass: a
// test run as root starts each role under its own uid (package layout),
// and t.TempDir()'s directories are 0700 root's.
//
// Invariant: only directories the test itself made are changed, and only
// by adding o+x (pass, never list or write).
package roletest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// Dir is a new t.TempDir() that it and its parent (the test's own
// directory) let any user pass.
func Dir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, fi.Mode().Perm()|0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// Readable is Dir whose files any user may also read (0755): for files
// a grant names, which brokerd checks as its own user.
func Readable(t testing.TB) string {
	t.Helper()
	d := Dir(t)
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// Passable skips t where no role user could pass a directory above the
// test's own: TMPDIR or one of its parents up to / without o+x. That is
// the Nix build sandbox, whose / is 0750 (NixOS/nix
// src/libstore/unix/build/chroot.cc at 88b09c64, line 30) and whose
// TMPDIR, /build, 0700 (unix/build/chroot-derivation-builder.cc line 17):
// there layout.Enterable rightly refuses every state directory, and Dir
// may not loosen what the test did not make. With CI set it fails instead.
func Passable(t testing.TB) {
	t.Helper()
	for d := filepath.Clean(os.TempDir()); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			msg := fmt.Sprintf("%s, above this test's directories, has mode %04o: no role user could pass it (the Nix build sandbox's / is 0750, its /build 0700), so bxctl refuses any state directory here", d, fi.Mode().Perm())
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		if d == "/" {
			return
		}
	}
}

// State is a new state directory made as the layout table says for this
// process's user alone ([layout.SingleUser]), with each of configs (by
// role) at config/<role>.toml: what a role started with -state (or with
// its config there) needs. It is under a temp directory of its own with
// a short path, since a Unix socket path holds at most 107 bytes, and is
// removed when the test ends.
func State(t testing.TB, configs map[string]string) string {
	t.Helper()
	root, err := os.MkdirTemp("", "bx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	state := filepath.Join(root, "s")
	me := layout.SingleUser(layout.ID{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())})
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := layout.Make(state, me); err != nil {
		t.Fatal(err)
	}
	for role, text := range configs {
		if err := os.WriteFile(layout.ConfigPath(state, role), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return state
}
