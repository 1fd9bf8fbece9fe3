package runner

import (
	"fmt"

	"github.com/containers/podman/v5/pkg/specgen"
	spec "github.com/opencontainers/runtime-spec/specs-go"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// The labels every container the runner creates carries: LabelInstance
// names the brokerd (by its state directory) that owns it, so that
// [Podman.Sweep] removes its own leftovers and nobody else's.
const (
	LabelInstance = "dev.wntrmute.boxmaker.brokerd"
	LabelRole     = "dev.wntrmute.boxmaker.role" // tool or egress
)

// The user every tool and egress container runs as: nobody, nogroup.
const containerUser = "65534:65534"

// EgressMount is where the egress proxy's socket directory is mounted in
// both containers of a call granted hosts.
const EgressMount = "/run/egress"

// toolCommand is the tool container's argv.
func toolCommand(tool string) []string { return []string{"/bin/toolkit", tool} }

// hardened is what every container the runner creates shares: the image
// by ID, a read-only root, no capabilities, no new privileges, user
// 65534, the limits, no logs kept by Podman (output is captured over
// attach, and a log file would copy it, secrets included, to disk), and
// the instance label.
func (c Config) hardened(instance, role string, timeout uint) *specgen.SpecGenerator {
	s := specgen.NewSpecGenerator(c.ToolImage, false)
	s.Labels = map[string]string{LabelInstance: instance, LabelRole: role}
	s.Terminal = ptr(false)
	s.ReadOnlyFilesystem = ptr(true)
	s.ReadWriteTmpfs = ptr(false)
	s.CapDrop = []string{"ALL"}
	s.NoNewPrivileges = ptr(true)
	pinIsolation(s, c.seccompProfile)
	s.User = containerUser
	userNS(s, c.rootless)
	mem := c.MemoryMB << 20
	s.ResourceLimits = &spec.LinuxResources{
		Memory: &spec.LinuxMemory{Limit: &mem, Swap: &mem},
		Pids:   &spec.LinuxPids{Limit: c.Pids},
	}
	s.OOMScoreAdj = ptr(1000)
	s.LogConfiguration = &specgen.LogConfig{Driver: "none"}
	s.Timeout = timeout
	s.Remove = ptr(false)
	s.Hostname = "tool"
	s.UseImageHosts = ptr(true)
	s.UseImageResolvConf = ptr(true)
	s.Mounts = []spec.Mount{{
		Type: "tmpfs", Source: "tmpfs", Destination: "/tmp",
		Options: []string{fmt.Sprintf("size=%dm", c.TmpfsMB), "mode=1777", "nosuid", "nodev", "notmpcopyup"},
	}}
	return s
}

// toolSpec is the tool container of one call: no network, the call's
// mounts at the same path, a private tmpfs for the secret, and, for a
// call granted hosts, the egress proxy's socket directory.
func (c Config) toolSpec(instance string, d policy.Decision, egressDir, toolkit string) *specgen.SpecGenerator {
	timeout := c.limit(d)
	s := c.hardened(instance, "tool", uint(timeout.Seconds())+backstop)
	s.Command = toolCommand(d.Tool())
	s.Stdin = ptr(true)
	s.NetNS = specgen.Namespace{NSMode: specgen.NoNetwork}
	s.Mounts = append(s.Mounts, spec.Mount{
		Type: "tmpfs", Source: "tmpfs", Destination: "/run/boxmaker",
		Options: []string{"size=1m", "mode=0700", "U", "nosuid", "nodev", "noexec", "notmpcopyup"},
	})
	for _, m := range d.Mounts() {
		s.Mounts = append(s.Mounts, bindMount(m, d.Tool()))
	}
	if _, ok := d.MCP(); ok {
		c.mcpSpec(s, d, toolkit)
	}
	if egressDir != "" {
		// Read-only: connecting to the proxy's socket needs no write, and
		// the tool must not replace the socket or fill the directory.
		s.Mounts = append(s.Mounts, spec.Mount{Type: "bind", Source: egressDir, Destination: EgressMount,
			Options: []string{"bind", "ro", "nosuid", "nodev", "noexec", "private"}})
	}
	return s
}

// bindMount mounts one granted path at the same path. It is a plain bind,
// not rbind: mounts below a granted directory stay out, since a
// read-only bind does not make its submounts read-only. Only shell may
// execute what it finds there.
func bindMount(m policy.Mount, tool string) spec.Mount {
	opts := []string{"bind", "ro", "nosuid", "nodev", "private"}
	if m.Writable {
		opts[1] = "rw"
	}
	if tool != toolset.Shell {
		opts = append(opts, "noexec")
	}
	p := m.Path.String()
	return spec.Mount{Type: "bind", Source: p, Destination: p, Options: opts}
}

// egressSpec is the egress proxy's container: the same hardening, the
// default network (the only container of a call that has one), and the
// socket directory it listens in.
func (c Config) egressSpec(instance string, hosts []string, dir string, timeout uint) *specgen.SpecGenerator {
	s := c.hardened(instance, "egress", timeout)
	s.Command = []string{"/bin/toolkit", "egress", "--socket", EgressMount + "/egress.sock"}
	for _, h := range hosts {
		s.Command = append(s.Command, "--host", h)
	}
	s.Mounts = append(s.Mounts, spec.Mount{Type: "bind", Source: dir, Destination: EgressMount,
		Options: []string{"bind", "rw", "nosuid", "nodev", "noexec", "private"}})
	// The proxy resolves names itself; it needs the host's resolver.
	s.UseImageResolvConf = nil
	if len(c.extraHosts) > 0 {
		s.HostAdd = c.extraHosts
		s.UseImageHosts = nil
	}
	return s
}

// backstop is how much longer than the runner's own timer Podman's
// timeout (conmon's SIGKILL) allows, for when brokerd is gone.
const backstop = 5

func ptr[T any](v T) *T { return &v }
