package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

// TestProtectedPathsAreNeverMounted: a mount that holds or lies inside
// brokerd's own files, Podman's socket directory, the runtime directory
// or /proc, /sys, /dev, /run is refused before Podman is asked, links
// included; a sibling is not.
func TestProtectedPathsAreNeverMounted(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{"state/audit", "grants", "src", "podman", "xdg", "secrets"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"src/a.txt", "secrets/token", "state/audit/log", "brokerd.toml"} {
		if err := os.WriteFile(filepath.Join(home, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The grants directory is named through a link: the real path is
	// protected too.
	if err := os.Symlink(filepath.Join(home, "grants"), filepath.Join(home, "grants-link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(home, "xdg"))
	cfg := Config{Runner: brokerd.Runner{PodmanSocket: filepath.Join(home, "podman", "podman.sock"), ToolImage: testImage}}
	work := filepath.Join(home, "state", "broker", "run")
	p, err := New(cfg, "i", work, []string{filepath.Join(home, "state"), filepath.Join(home, "grants-link"),
		filepath.Join(home, "brokerd.toml"), filepath.Join(home, "secrets", "token"), filepath.Join(home, "sockets-not-yet")}, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	shell := func(dir string) (string, string, any) {
		return autoGrant("s", "shell", []string{dir}), "shell", map[string]string{"command": "ls", "workdir": dir}
	}
	read := func(f string) (string, string, any) {
		return autoGrant("r", "read_file", []string{f}), "read_file", map[string]string{"path": f}
	}
	cases := []struct {
		name      string
		call      func(string) (string, string, any)
		path      string
		protected bool
	}{
		{"the home holding the state", shell, home, true},
		{"the state directory", shell, filepath.Join(home, "state"), true},
		{"the audit log", read, filepath.Join(home, "state", "audit", "log"), true},
		{"the grants, by their real path", shell, filepath.Join(home, "grants"), true},
		{"the config file", read, filepath.Join(home, "brokerd.toml"), true},
		{"a secret file's directory", shell, filepath.Join(home, "secrets"), true},
		{"Podman's socket directory", shell, filepath.Join(home, "podman"), true},
		{"the runtime directory", shell, filepath.Join(home, "xdg"), true},
		{"a socket directory not made yet, by its parent", shell, home, true},
		{"/proc", read, "/proc/version", true},
		{"/sys", shell, "/sys/kernel", true},
		{"/dev", read, "/dev/null", true},
		{"/run", shell, "/run", true},
		{"a sibling", shell, filepath.Join(home, "src"), false},
		{"a file in a sibling", read, filepath.Join(home, "src", "a.txt"), false},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			g, tool, args := tt.call(tt.path)
			d := decide(t, g, tool, args)
			problem, err := checkMounts(d, p.protected)
			if tt.protected {
				if !errors.Is(err, ErrProtected) || problem != "" || !strings.HasSuffix(err.Error(), "see docs/runbook.md#mount-protected") {
					t.Errorf("checkMounts(%s) = %q, %v; want ErrProtected", tt.path, problem, err)
				}
				return
			}
			if err != nil || problem != "" {
				t.Errorf("checkMounts(%s) = %q, %v; want nothing", tt.path, problem, err)
			}
		})
	}
}

// TestProtectedPathsMustBeAbsolute: a relative protected path could not
// be compared, so New refuses it.
func TestProtectedPathsMustBeAbsolute(t *testing.T) {
	if _, err := New(Config{Runner: brokerd.Runner{PodmanSocket: "/nonexistent/p.sock", ToolImage: testImage}}, "i", t.TempDir(), []string{"state"}, nil, quiet); err == nil {
		t.Error("New accepted a relative protected path")
	}
}

// TestEveryLayoutEntryIsProtected: for every entry of the state
// directory's layout table (every role's state and config, grants,
// memory, sessions, the owner's jobs, each socket directory), a
// read_file, write_file or shell mount of it or under it is refused with
// mount-protected, though a grant covers the path and the state directory
// itself is not on the list (issue 19 item 5). The owner's own tree
// beside it is not.
func TestEveryLayoutEntryIsProtected(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	for _, e := range layout.Table {
		dir := e.In(state)
		if e.Kind == layout.File {
			dir = filepath.Dir(dir)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sibling := filepath.Join(filepath.Dir(state), "src", "a.txt")
	if err := os.MkdirAll(filepath.Dir(sibling), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sibling, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Runner: brokerd.Runner{PodmanSocket: "/nonexistent/podman.sock", ToolImage: testImage}}
	p, err := New(cfg, "i", filepath.Join(t.TempDir(), "work"), layout.In(state), nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(path string) (string, any){
		"read_file": func(f string) (string, any) { return f, map[string]string{"path": f} },
		"write_file": func(f string) (string, any) {
			return filepath.Dir(f), map[string]string{"path": f, "content": "x"}
		},
		"shell": func(f string) (string, any) {
			return filepath.Dir(f), map[string]string{"command": "ls", "workdir": filepath.Dir(f)}
		},
	}
	for _, e := range layout.Table {
		if e == &layout.State { // the state directory itself is not on the list here
			continue
		}
		// A file inside a directory entry, or the file entry itself.
		f := filepath.Join(e.In(state), "x.toml")
		if e.Kind == layout.File {
			f = e.In(state)
		}
		for tool, call := range calls {
			t.Run(e.Path+"/"+tool, func(t *testing.T) {
				covered, args := call(f)
				d := decide(t, autoGrant("g", tool, []string{covered}), tool, args)
				problem, err := checkMounts(d, p.protected)
				if !errors.Is(err, ErrProtected) || problem != "" || !strings.HasSuffix(err.Error(), "see docs/runbook.md#mount-protected") {
					t.Errorf("%s under %s: checkMounts = %q, %v; want ErrProtected", tool, e.Path, problem, err)
				}
			})
		}
	}
	d := decide(t, autoGrant("g", "read_file", []string{sibling}), "read_file", map[string]string{"path": sibling})
	if problem, err := checkMounts(d, p.protected); err != nil || problem != "" {
		t.Errorf("a file beside the state directory: checkMounts = %q, %v; want nothing", problem, err)
	}
}
