package runner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/containers/podman/v5/libpod/define"
	"github.com/containers/podman/v5/pkg/specgen"
)

// pinIsolation sets explicitly what Podman would otherwise fill in from
// the server's containers.conf, which could make any of it weaker:
// private PID, IPC, UTS and cgroup namespaces, never privileged, no
// devices, the seccomp policy "default" (never the image's) with the
// runner's own profile (toolProfile, at profile, written by [New]):
// Podman's API has no way to name its built-in profile, and an unset path
// would mean containers.conf's. Inspect does not show the profile a
// container got; the startup probe checks from inside a container that
// seccomp filters it and refuses new namespaces.
func pinIsolation(s *specgen.SpecGenerator, profile string) {
	for _, ns := range []*specgen.Namespace{&s.PidNS, &s.IpcNS, &s.UtsNS, &s.CgroupNS} {
		*ns = specgen.Namespace{NSMode: specgen.Private}
	}
	s.Privileged = ptr(false)
	s.Devices = nil
	s.DeviceCgroupRule = nil
	s.SeccompPolicy = "default"
	s.SeccompProfilePath = profile
}

// isolationDiffers lists what of a created container's namespaces,
// privileges, devices, security options, log driver and mounts differs
// from what s asked for (pinIsolation's settings and the exact mounts).
func isolationDiffers(c *define.InspectContainerData, s *specgen.SpecGenerator) []string {
	h := c.HostConfig
	if h == nil {
		return []string{"host config"}
	}
	var bad []string
	check := func(ok bool, what string) {
		if !ok {
			bad = append(bad, what)
		}
	}
	check(!h.Privileged, "privileged")
	check(h.PidMode == "private", "pid namespace")
	check(h.IpcMode == "private", "ipc namespace")
	check(h.UTSMode == "private", "uts namespace")
	check(h.CgroupMode == "private", "cgroup namespace")
	check(len(h.Devices) == 0, "devices")
	check(h.LogConfig != nil && h.LogConfig.Type == "none", "log driver")
	for _, o := range h.SecurityOpt {
		// seccomp=, unmask= and label=disable or apparmor=unconfined
		// each weaken the container; a confining label or profile is
		// the host's default and stays.
		ok := o == "no-new-privileges" ||
			(strings.HasPrefix(o, "label=") || strings.HasPrefix(o, "apparmor=")) && !strings.Contains(o, "disable") && !strings.Contains(o, "unconfined")
		check(ok, "security option "+o)
	}
	return append(bad, mountsDiffer(c, s)...)
}

// mountsDiffer compares the created container's mounts with s's: the same
// tmpfs destinations with exactly the options asked for, the same binds
// (source, destination, read-write or not, options, private
// propagation), and nothing else.
func mountsDiffer(c *define.InspectContainerData, s *specgen.SpecGenerator) []string {
	var bad []string
	tmpfs := map[string]bool{}
	binds := map[string]bool{}
	for _, m := range s.Mounts {
		switch m.Type {
		case "tmpfs":
			tmpfs[m.Destination] = true
			got, ok := c.HostConfig.Tmpfs[m.Destination]
			want := without(m.Options, "notmpcopyup")
			if !ok || !sameSet(without(strings.Split(got, ","), "rprivate"), want) {
				bad = append(bad, fmt.Sprintf("tmpfs %s (%q)", m.Destination, got))
			}
		case "bind":
			binds[m.Destination] = true
			i := slices.IndexFunc(c.Mounts, func(im define.InspectMount) bool { return im.Destination == m.Destination })
			if i < 0 {
				bad = append(bad, "missing mount "+m.Destination)
				continue
			}
			im := c.Mounts[i]
			rw := slices.Contains(m.Options, "rw")
			if im.Type != "bind" || im.Source != m.Source || im.RW != rw || im.Propagation != "private" ||
				!sameSet(im.Options, without(m.Options, "ro", "rw", "private")) {
				bad = append(bad, fmt.Sprintf("mount %s (%+v)", m.Destination, im))
			}
		default:
			bad = append(bad, "unexpected asked mount type "+m.Type)
		}
	}
	for d := range c.HostConfig.Tmpfs {
		if !tmpfs[d] {
			bad = append(bad, "extra tmpfs "+d)
		}
	}
	for _, im := range c.Mounts {
		if !binds[im.Destination] {
			bad = append(bad, "extra mount "+im.Destination)
		}
	}
	return bad
}

func without(list []string, drop ...string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
