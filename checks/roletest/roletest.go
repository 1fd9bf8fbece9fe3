// Package roletest makes test directories the role users can pass: a
// test run as root starts each role under its own uid (package layout),
// and t.TempDir()'s directories are 0700 root's.
//
// Invariant: only directories the test itself made are changed, and only
// by adding o+x (pass, never list or write).
package roletest

import (
	"os"
	"path/filepath"
	"testing"
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
