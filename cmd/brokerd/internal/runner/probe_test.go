package runner

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containers/podman/v5/libpod/define"
	"go.podman.io/common/pkg/seccomp"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

// goodProbe is what the probe prints in a rootful tool container.
const goodProbe = `@status
Name:	cat
Uid:	65534	65534	65534	65534
Gid:	65534	65534	65534	65534
CapPrm:	0000000000000000
CapEff:	0000000000000000
CapAmb:	0000000000000000
NoNewPrivs:	1
Seccomp:	2
@uid_map
         0 2147483647      65536
@net
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
@namespaces
unshare 1
clone 1
clone3 38
setns 1
@dev
core
fd
full
mqueue
null
ptmx
pts
random
shm
stderr
stdin
stdout
tty
urandom
zero
@tags
@end
`

// TestProbeDiffers: every difference the probe can report refuses, and
// the testnet marker is read.
func TestProbeDiffers(t *testing.T) {
	for _, tt := range []struct {
		name, from, to string
		rootful        bool
		want           string
	}{
		{"good", "", "", true, ""},
		{"no seccomp", "Seccomp:\t2", "Seccomp:\t0", true, "Seccomp"},
		{"new privileges", "NoNewPrivs:\t1", "NoNewPrivs:\t0", true, "NoNewPrivs"},
		{"a capability", "CapEff:\t0000000000000000", "CapEff:\t0000000000000400", true, "CapEff"},
		{"root", "Uid:\t65534", "Uid:\t0", true, "Uid"},
		{"another interface", "@namespaces", "  eth0: 1 2 3\n@namespaces", true, "network interfaces"},
		{"no interface at all", "    lo:", "    xx:", true, "network interfaces"},
		{"no user namespace", "0 2147483647      65536", "0          0 4294967295", true, "uid map"},
		{"no user namespace, rootless", "0 2147483647      65536", "0          0 4294967295", false, "uid map"},
		{"a range from the host's root", "0 2147483647      65536", "0          0      65536", true, "uid map"},
		{"rootless: the user's own id", "0 2147483647      65536", "65534          0      1", false, ""},
		{"no uid map", "         0 2147483647      65536\n", "", true, "uid map"},
		{"cut short", "@end", "", true, "incomplete"},
		// Podman's own default profile: the kernel answers (EINVAL, EBADF).
		{"unshare allowed", "unshare 1", "unshare 22", true, "unshare answered 22"},
		{"clone allowed", "clone 1", "clone 22", true, "clone answered 22"},
		{"clone3 allowed", "clone3 38", "clone3 22", true, "clone3 answered 22"},
		{"setns allowed", "setns 1", "setns 9", true, "setns answered 9"},
		{"a user namespace made", "unshare 1", "unshare 0", true, "unshare answered 0"},
		{"no toolkit", "unshare 1\nclone 1\nclone3 38\nsetns 1\n", "sh: /bin/toolkit: not found\n", true, "no answer for unshare"},
		{"an attempt missing", "setns 1\n", "", true, "no answer for setns"},
		{"an attempt twice", "setns 1\n", "setns 1\nsetns 1\n", true, "a line twice"},
		{"an extra line", "setns 1\n", "setns 1\nmount 1\n", true, "unexpected lines"},
		// Rootless Podman bind-mounts a containers.conf device: only the
		// listing from inside shows it.
		{"a device", "@dev\n", "@dev\nxzero\n", false, "device /dev/xzero"},
		{"no /dev listing", "@dev\ncore\n", "core\n", true, "no /dev listing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := goodProbe
			if tt.from != "" {
				out = strings.Replace(out, tt.from, tt.to, 1)
			}
			tags, bad := probeDiffers(out, tt.rootful)
			if got := strings.Join(bad, "; "); tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("differs = %q, want %q", got, tt.want)
			}
			if tags != "" {
				t.Errorf("tags = %q", tags)
			}
		})
	}
	if tags, _ := probeDiffers(strings.Replace(goodProbe, "@tags\n", "@tags\nboxmaker_testnet\n", 1), true); tags != "boxmaker_testnet" {
		t.Errorf("tags = %q, want the marker's", tags)
	}
}

// TestIsolationDiffers: a created container weaker than asked in any
// pinned setting or mount is refused.
func TestIsolationDiffers(t *testing.T) {
	d := decide(t, autoGrant("sh", "shell", []string{"/srv/w"}), "shell", map[string]string{"command": "true", "workdir": "/srv/w"})
	c, _ := Config{Runner: brokerd.Runner{PodmanSocket: "/run/p.sock", ToolImage: testImage}}.Check()
	s := c.toolSpec("inst", d, "/state/egress-1")
	good := func() *define.InspectContainerData {
		return &define.InspectContainerData{
			HostConfig: &define.InspectContainerHostConfig{
				PidMode: "private", IpcMode: "private", UTSMode: "private", CgroupMode: "private",
				LogConfig: &define.InspectLogConfig{Type: "none"}, SecurityOpt: []string{"no-new-privileges"},
				Tmpfs: map[string]string{"/tmp": "size=64m,mode=1777,nosuid,nodev,rprivate",
					"/run/boxmaker": "size=1m,mode=0700,U,nosuid,nodev,noexec,rprivate"},
			},
			Mounts: []define.InspectMount{
				{Type: "bind", Source: "/srv/w", Destination: "/srv/w", Options: []string{"bind", "nosuid", "nodev"}, Propagation: "private"},
				{Type: "bind", Source: "/state/egress-1", Destination: EgressMount, Options: []string{"bind", "nosuid", "nodev", "noexec"}, RW: false, Propagation: "private"},
			},
		}
	}
	if bad := isolationDiffers(good(), s); len(bad) > 0 {
		t.Fatalf("the container as asked differs in %q", bad)
	}
	for name, weaken := range map[string]func(*define.InspectContainerData){
		"privileged":       func(c *define.InspectContainerData) { c.HostConfig.Privileged = true },
		"pid namespace":    func(c *define.InspectContainerData) { c.HostConfig.PidMode = "host" },
		"ipc namespace":    func(c *define.InspectContainerData) { c.HostConfig.IpcMode = "host" },
		"uts namespace":    func(c *define.InspectContainerData) { c.HostConfig.UTSMode = "host" },
		"cgroup namespace": func(c *define.InspectContainerData) { c.HostConfig.CgroupMode = "host" },
		"devices": func(c *define.InspectContainerData) {
			c.HostConfig.Devices = []define.InspectDevice{{PathOnHost: "/dev/fuse"}}
		},
		"log driver": func(c *define.InspectContainerData) { c.HostConfig.LogConfig.Type = "k8s-file" },
		"security option": func(c *define.InspectContainerData) {
			c.HostConfig.SecurityOpt = append(c.HostConfig.SecurityOpt, "seccomp=unconfined")
		},
		"tmpfs /tmp":        func(c *define.InspectContainerData) { c.HostConfig.Tmpfs["/tmp"] = "size=64m,mode=1777,nodev,rprivate" },
		"extra tmpfs":       func(c *define.InspectContainerData) { c.HostConfig.Tmpfs["/dev/shm"] = "size=64m" },
		"mount /srv/w":      func(c *define.InspectContainerData) { c.Mounts[0].RW = true },
		"mount /run/egress": func(c *define.InspectContainerData) { c.Mounts[1].Options = []string{"bind", "nosuid", "nodev"} },
		"extra mount": func(c *define.InspectContainerData) {
			c.Mounts = append(c.Mounts, define.InspectMount{Type: "volume", Destination: "/data"})
		},
		"missing mount": func(c *define.InspectContainerData) { c.Mounts = c.Mounts[:1] },
	} {
		in := good()
		weaken(in)
		if bad := strings.Join(isolationDiffers(in, s), "; "); !strings.Contains(bad, name) {
			t.Errorf("%s: differs = %q", name, bad)
		}
	}
}

// TestCheckProbesIsolation: against a real service whose containers.conf
// asks for the host's namespaces, a log driver and no seccomp, the
// pinned settings (the runner's own seccomp profile included) win and
// the check passes; one that adds a device is refused. With Podman's own
// default profile (which lets a container make a user namespace) or none
// at all, the probe, run in a tool image container, finds it from inside
// and brokerd refuses to start.
func TestCheckProbesIsolation(t *testing.T) {
	svc := podmantest.Require(t)
	image := svc.ToolImage(t)
	if err := newRunner(t, svc, image, nil).Check(context.Background()); err != nil {
		t.Fatalf("Check on the test service: %v", err)
	}
	podmanDefault := filepath.Join(t.TempDir(), "podman-default.json")
	b, err := json.Marshal(seccomp.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(podmanDefault, b, 0o644)
	for _, tt := range []struct{ name, profile, want string }{
		{"Podman's default profile", podmanDefault, "namespace probe: unshare answered 22"},
		{"no profile", "unconfined", `Seccomp "0"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newRunner(t, svc, image, nil)
			p.cfg.seccompProfile = tt.profile
			err := p.Check(context.Background())
			if !errors.Is(err, ErrProbe) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v; want the probe's refusal naming %s", err, tt.want)
			}
			t.Logf("refused: %v", err)
		})
	}
	_, conf, err := podmantest.Find()
	if err != nil {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(conf); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, conf, want string
		is               error
	}{
		{"host namespaces, a log driver, no seccomp", "pidns = \"host\"\nipcns = \"host\"\nutsns = \"host\"\ncgroupns = \"host\"\n" +
			"log_driver = \"k8s-file\"\nseccomp_profile = \"unconfined\"\n", "", nil},
		// Podman adds containers.conf's devices to every container and
		// the API cannot take them away: the check refuses. Rootful,
		// inspect shows the device; rootless Podman bind-mounts it
		// instead, and only the probe's /dev listing finds it.
		{"a device", "devices = [\"/dev/zero:/dev/xzero:rwm\"]\n", "differs in: devices)", ErrIsolation},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hostile := filepath.Join(t.TempDir(), "containers.conf")
			os.WriteFile(hostile, []byte(strings.Replace(string(b), "[containers]\n", "[containers]\n"+tt.conf, 1)), 0o644)
			weak, err := podmantest.Start(podmantest.Options{Env: []string{"CONTAINERS_CONF=" + hostile}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { weak.Stop() })
			p := newRunner(t, weak, weak.ToolImage(t), nil)
			err = p.Check(context.Background())
			if weak.Rootless && tt.is == ErrIsolation {
				tt.is, tt.want = ErrProbe, "device /dev/xzero"
			}
			switch {
			case tt.is == nil && err != nil:
				t.Fatalf("Check = %v; want the pinned settings to win", err)
			case tt.is != nil && (!errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "namespace")):
				t.Fatalf("Check = %v; want only the refusal naming %s", err, tt.want)
			}
			t.Logf("Check: %v", err)
			if l := leftovers(t, weak, p); len(l) > 0 {
				t.Errorf("containers left behind: %v", l)
			}
		})
	}
}

// TestUserNSRefusal: a rootful service without subordinate ids for
// containers is refused with its own runbook entry.
func TestUserNSRefusal(t *testing.T) {
	podman := fail(ErrPodman, "create: creating container storage: not enough unused IDs in user namespace")
	if err := userNSRefusal(podman, false); !errors.Is(err, ErrUserNS) || !strings.HasSuffix(err.Error(), "#podman-rootful-userns") {
		t.Errorf("rootful = %v", err)
	}
	if err := userNSRefusal(podman, true); err != podman {
		t.Errorf("rootless = %v, want Podman's error as it is", err)
	}
	if other := fail(ErrPodman, "create: no space"); userNSRefusal(other, false) != other {
		t.Error("another create error changed")
	}
}

// TestSupportedVersion: only Podman 5.x is accepted.
func TestSupportedVersion(t *testing.T) {
	for v, want := range map[string]bool{"5.8.2": true, "5.0.0-rc1": true, "4.9.4": false, "6.0.0": false,
		"9.1": false, "50.1.0": false, "": false, "5x": false} {
		if got := supportedVersion(v); got != want {
			t.Errorf("supportedVersion(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestCheckRefusesTestnetImage: brokerd refuses to start with a tool
// image built with the boxmaker_testnet tag; only a test's own opt-in
// (a field no config can set) lets the check pass it.
func TestCheckRefusesTestnetImage(t *testing.T) {
	svc := podmantest.Require(t)
	image := svc.TestnetToolImage(t)
	err := newRunner(t, svc, image, nil).Check(context.Background())
	if !errors.Is(err, ErrTestnetImage) || !strings.Contains(err.Error(), "boxmaker_testnet") {
		t.Fatalf("Check with the testnet image = %v, want the testnet refusal", err)
	}
	if err := newRunner(t, svc, image, func(c *Config) { c.allowTestnetImage = true }).Check(context.Background()); err != nil {
		t.Errorf("Check with the testnet image, opted in: %v", err)
	}
}
