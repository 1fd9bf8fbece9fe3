package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	cfg := Config{PodmanSocket: filepath.Join(home, "podman", "podman.sock"), ToolImage: testImage}
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
	if _, err := New(Config{PodmanSocket: "/nonexistent/p.sock", ToolImage: testImage}, "i", t.TempDir(), []string{"state"}, nil, quiet); err == nil {
		t.Error("New accepted a relative protected path")
	}
}
