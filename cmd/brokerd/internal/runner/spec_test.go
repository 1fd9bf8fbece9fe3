package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containers/podman/v5/pkg/specgen"
	spec "github.com/opencontainers/runtime-spec/specs-go"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

var testImage = "sha256:" + strings.Repeat("ab", 32)

func checked(t *testing.T) Config {
	t.Helper()
	c, err := Config{Runner: brokerd.Runner{PodmanSocket: "/run/p.sock", ToolImage: testImage}}.Check()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestToolSpecHoldsOnlyTheGrant checks, without Podman, what every tool
// container is asked for: the settings the runner then verifies on the
// created container.
func TestToolSpecHoldsOnlyTheGrant(t *testing.T) {
	c := checked(t)
	for _, tt := range []struct {
		name     string
		d        policy.Decision
		mount    string
		opts     []string
		wantTime uint
	}{
		{"read_file", decide(t, autoGrant("r", "read_file", []string{"/h"}), "read_file", map[string]string{"path": "/h/a/f.txt"}),
			"/h/a/f.txt", []string{"bind", "ro", "nosuid", "nodev", "private", "noexec"}, brokerd.DefaultTimeoutS + backstop},
		{"write_file", decide(t, autoGrant("w", "write_file", []string{"/h"}), "write_file", map[string]string{"path": "/h/a/f.txt", "content": "x"}),
			"/h/a", []string{"bind", "rw", "nosuid", "nodev", "private", "noexec"}, brokerd.DefaultTimeoutS + backstop},
		{"shell ro", decide(t, autoGrant("s", "shell", []string{"/src"}), "shell", map[string]string{"command": "ls", "workdir": "/src/p"}),
			"/src/p", []string{"bind", "ro", "nosuid", "nodev", "private"}, brokerd.DefaultShellTimeoutS + backstop},
		{"shell rw", decide(t, autoGrant("s", "shell", []string{"/src"}, "writable = true"), "shell", map[string]string{"command": "ls", "workdir": "/src"}),
			"/src", []string{"bind", "rw", "nosuid", "nodev", "private"}, brokerd.DefaultShellTimeoutS + backstop},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := c.toolSpec("inst", tt.d, "")
			if s.Image != testImage || !slices.Equal(s.Command, []string{"/bin/toolkit", tt.d.Tool()}) || s.Labels[LabelInstance] != "inst" || s.Labels[LabelRole] != "tool" {
				t.Errorf("image %q command %q labels %v", s.Image, s.Command, s.Labels)
			}
			if s.NetNS.NSMode != specgen.NoNetwork || !*s.ReadOnlyFilesystem || *s.ReadWriteTmpfs || !slices.Equal(s.CapDrop, []string{"ALL"}) ||
				!*s.NoNewPrivileges || s.User != "65534:65534" || s.Privileged != nil && *s.Privileged || len(s.CapAdd) > 0 {
				t.Errorf("hardening: %+v", s)
			}
			if *s.ResourceLimits.Memory.Limit != brokerd.DefaultMemoryMB<<20 || *s.ResourceLimits.Memory.Swap != brokerd.DefaultMemoryMB<<20 || s.ResourceLimits.Pids.Limit != brokerd.DefaultPids {
				t.Errorf("limits: %+v", s.ResourceLimits)
			}
			if s.Timeout != tt.wantTime || s.LogConfiguration.Driver != "none" || !*s.Stdin || *s.Terminal || len(s.Env) > 0 || s.EnvHost != nil && *s.EnvHost {
				t.Errorf("timeout %d log %q stdin %v env %v", s.Timeout, s.LogConfiguration.Driver, *s.Stdin, s.Env)
			}
			var binds []string
			for _, m := range s.Mounts {
				switch m.Destination {
				case "/tmp", "/run/boxmaker":
					if m.Type != "tmpfs" || !slices.Contains(m.Options, "nosuid") || !slices.Contains(m.Options, "nodev") {
						t.Errorf("tmpfs %s: %+v", m.Destination, m)
					}
				default:
					binds = append(binds, m.Destination)
					if m.Source != tt.mount || m.Destination != tt.mount || !slices.Equal(m.Options, tt.opts) {
						t.Errorf("bind %+v, want %s at the same path with %v", m, tt.mount, tt.opts)
					}
				}
			}
			if len(binds) != 1 {
				t.Errorf("bind mounts %v, want exactly the granted path", binds)
			}
		})
	}
}

func TestEgressSpecHasTheNetworkTheToolLacks(t *testing.T) {
	c := checked(t)
	d := decide(t, autoGrant("f", "http_fetch", []string{"example.com"}), "http_fetch", map[string]string{"url": "https://example.com/x"})
	tool := c.toolSpec("inst", d, "/work/egress-1")
	eg := c.egressSpec("inst", []string{"example.com"}, "/work/egress-1", 70)
	if tool.NetNS.NSMode != specgen.NoNetwork || eg.NetNS.NSMode == specgen.NoNetwork {
		t.Errorf("tool network %q, egress network %q", tool.NetNS.NSMode, eg.NetNS.NSMode)
	}
	if !slices.Equal(eg.Command, []string{"/bin/toolkit", "egress", "--socket", "/run/egress/egress.sock", "--host", "example.com"}) || eg.Labels[LabelRole] != "egress" {
		t.Errorf("egress command %q labels %v", eg.Command, eg.Labels)
	}
	for _, s := range []*specgen.SpecGenerator{tool, eg} {
		if !*s.ReadOnlyFilesystem || !*s.NoNewPrivileges || s.User != "65534:65534" || !slices.Equal(s.CapDrop, []string{"ALL"}) {
			t.Errorf("hardening lost: %+v", s)
		}
		if !slices.ContainsFunc(s.Mounts, func(m spec.Mount) bool {
			return m.Source == "/work/egress-1" && m.Destination == "/run/egress" && slices.Contains(m.Options, "noexec")
		}) {
			t.Errorf("no egress directory mount: %+v", s.Mounts)
		}
	}
	// The tool only connects to the socket: its mount is read-only, the
	// proxy's (which creates the socket) read-write.
	for s, want := range map[*specgen.SpecGenerator]string{tool: "ro", eg: "rw"} {
		for _, m := range s.Mounts {
			if m.Destination == "/run/egress" && !slices.Contains(m.Options, want) {
				t.Errorf("egress directory mount %v, want %s", m.Options, want)
			}
		}
	}
}

func TestZeroDecisionRunsNothing(t *testing.T) {
	p, err := New(Config{Runner: brokerd.Runner{PodmanSocket: "/nonexistent/p.sock", ToolImage: testImage}}, "i", t.TempDir(), nil, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), policy.Decision{}); !errors.Is(err, ErrNoDecision) {
		t.Errorf("Run(zero Decision) = %v", err)
	}
}

func TestCappedKeepsThePrefixAndSaysOnce(t *testing.T) {
	n := 0
	c := newCapped(10, func() { n++ })
	for _, s := range []string{"01234", "56789ab", "cdef"} {
		if w, err := c.Write([]byte(s)); w != len(s) || err != nil {
			t.Fatalf("Write = %d, %v; a capped stream must keep draining", w, err)
		}
	}
	if c.String() != "0123456789" || n != 1 {
		t.Errorf("kept %q, over called %d times", c.String(), n)
	}
}

func TestRootlessKeepsTheUserAsBrokerd(t *testing.T) {
	c := checked(t)
	d := decide(t, autoGrant("s", "shell", []string{"/src"}), "shell", map[string]string{"command": "ls", "workdir": "/src"})
	for _, s := range []*specgen.SpecGenerator{c.toolSpec("i", d, ""), c.egressSpec("i", []string{"a.example"}, "/e", 10)} {
		if s.UserNS.NSMode != specgen.Auto || s.IDMappings == nil || !s.IDMappings.AutoUserNs || s.IDMappings.AutoUserNsOpts.Size != 65536 {
			t.Errorf("rootful user namespace = %+v %+v, want auto of 65536 ids", s.UserNS, s.IDMappings)
		}
	}
	c.rootless = true
	for _, s := range []*specgen.SpecGenerator{c.toolSpec("i", d, ""), c.egressSpec("i", []string{"a.example"}, "/e", 10)} {
		if s.UserNS.NSMode != specgen.KeepID || s.UserNS.Value != "uid=65534,gid=65534" || s.User != "65534:65534" {
			t.Errorf("rootless user namespace = %+v user %q", s.UserNS, s.User)
		}
	}
}

// TestLinksAreNeverMounted: a granted path reached through a symbolic
// link (planted, say, by an earlier shell call in a writable grant) is
// refused before Podman is asked, as is a missing path.
func TestLinksAreNeverMounted(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "real.txt"), []byte("x"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link.txt"))
	os.Symlink(dir, filepath.Join(dir, "sub"))
	p, err := New(Config{Runner: brokerd.Runner{PodmanSocket: "/nonexistent/p.sock", ToolImage: testImage}}, "i", t.TempDir(), nil, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{dir + "/link.txt", "symbolic link"},
		{dir + "/sub/real.txt", "symbolic link"},
		{dir + "/missing.txt", "no such file"},
		{dir, "not a regular file"},
	} {
		d := decide(t, autoGrant("r", "read_file", []string{dir}), "read_file", map[string]string{"path": tt.path})
		out, err := p.Run(context.Background(), d)
		if err != nil || out.Exit != 1 || !strings.Contains(out.Stderr, tt.want) {
			t.Errorf("read_file %s = %+v, %v; want the tool's error %q", tt.path, out, err, tt.want)
		}
	}
}
