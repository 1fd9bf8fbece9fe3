package ownership

import (
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// In the Nix sandbox this package's own tests write under /build, below
// a / that reads as nobody's (testonly.go).
func init() { TestOnlyTrustSandboxRoot() }

// dirInfo is an Lstat of a directory owned by uid with mode.
type dirInfo struct {
	uid  uint32
	mode fs.FileMode
}

func (d dirInfo) Name() string       { return "/" }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return fs.ModeDir | d.mode }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return true }
func (d dirInfo) Sys() any           { return &syscall.Stat_t{Uid: d.uid} }

// TestSandboxRoot: the one exception TestOnlyTrustSandboxRoot makes, and
// nothing more. The production rule (the flag unset) refuses a / owned by
// the overflow uid; with it, a test binary accepts that / as a directory
// on the way only, only when root is unmapped here, and never a / that
// its group may write, another uid's /, or another directory so owned.
func TestSandboxRoot(t *testing.T) {
	orig := unmapped
	t.Cleanup(func() { unmapped = orig; sandboxRoot.Store(true) })
	unsafe := func(at, format string, args ...any) error { return &UnsafeError{Path: at, At: at, Reason: format} }
	cases := []struct {
		name      string
		trust     bool // TestOnlyTrustSandboxRoot was called
		rootMaps  bool // uid 0 is mapped in this user namespace
		at        string
		fi        dirInfo
		last      bool
		wantError string
	}{
		{"the production rule", false, false, "/", dirInfo{65534, 0o755}, false, "is owned by uid"},
		{"a test in the sandbox", true, false, "/", dirInfo{65534, 0o750}, false, ""},
		{"/ as the file itself", true, false, "/", dirInfo{65534, 0o755}, true, "is owned by uid"},
		{"root mapped: / is someone's", true, true, "/", dirInfo{65534, 0o755}, false, "is owned by uid"},
		{"another uid's /", true, false, "/", dirInfo{4242, 0o755}, false, "is owned by uid"},
		{"a / its group may write", true, false, "/", dirInfo{65534, 0o775}, false, "is writable by"},
		{"a directory below /", true, false, "/build", dirInfo{65534, 0o755}, false, "is owned by uid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sandboxRoot.Store(c.trust)
			unmapped = func() (uint32, bool) { return 65534, c.rootMaps }
			err := Trust(1000).judge(c.at, c.fi, c.last, false, unsafe)
			switch {
			case c.wantError == "" && err != nil:
				t.Errorf("judge = %v, want it accepted", err)
			case c.wantError != "" && (err == nil || !strings.Contains(err.Error(), c.wantError)):
				t.Errorf("judge = %v, want %q", err, c.wantError)
			}
		})
	}
}

// TestRootMapped reads /proc/self/uid_map's lines as the kernel writes
// them (user_namespaces(7)): a map that cannot be read trusts nothing.
func TestRootMapped(t *testing.T) {
	for in, want := range map[string]bool{
		"         0          0 4294967295\n": true,  // the initial namespace
		"      1000      30001          1\n": false, // Nix's build user alone
		"         0     100000      65536\n": true,  // uid-range builds
		"1000 30001 1\n0 30002 1\n":          true,
		"":                                   false,
		"garbage\n":                          true,
		"x 1 1\n":                            true,
	} {
		if got := rootMapped(in); got != want {
			t.Errorf("rootMapped(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestSandboxRootHere: where this test runs under an unmapped / (the
// sandbox), a file of its own under TMPDIR is accepted, as every package's
// owner-file tests need; elsewhere / is root's and the exception unused.
func TestSandboxRootHere(t *testing.T) {
	fi, err := os.Stat("/")
	if err != nil {
		t.Fatal(err)
	}
	over, mapped := unmapped()
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != over || mapped {
		t.Skipf("/ is uid %d's here, in a namespace that maps root: not the sandbox", uid)
	}
	f := write(t, t.TempDir()+"/g.toml", 0o644)
	if _, err := Self().Check(f); err != nil {
		t.Errorf("Check(a file of this test's under an unmapped /) = %v", err)
	}
	sandboxRoot.Store(false)
	defer sandboxRoot.Store(true)
	if _, err := Self().Check(f); err == nil || !strings.Contains(err.Error(), "/ (on its path) is owned by uid") {
		t.Errorf("Check(the same file, the production rule) = %v, want / refused", err)
	}
}
