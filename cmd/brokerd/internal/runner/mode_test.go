package runner

import (
	"strconv"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// hostSide is the address at which a call's egress container reaches a
// listener the test opens on every host address. Rootful, that is the
// default bridge's gateway. Rootless, the container's network is
// slirp4netns in the user's own namespace: its connections leave from
// the host's own stack, so any host address but loopback (which slirp4netns
// keeps from containers) reaches the listener; the VM test host gives
// its guest one on a dummy interface, having no network device.
func hostSide(t *testing.T, svc *podmantest.Service) string {
	t.Helper()
	if !svc.Rootless {
		return "10.88.0.1"
	}
	targets := hostTargets(t)
	if len(targets) < 2 {
		t.Fatal("rootless: the host has no IPv4 address but loopback for a container's network to reach (the VM test host adds one on a dummy interface)")
	}
	return targets[1]
}

// cgroupScript prints, using only the shell's builtins (so it still runs
// when the pids limit leaves no room for another process), every line of
// the container's own pids and memory limit and event files, as
// "CG <file> <line>": cgroup v2's names, or v1's under their controller.
const cgroupScript = `for f in pids.max pids.events memory.max memory.swap.max memory.events pids/pids.max pids/pids.events memory/memory.limit_in_bytes memory/memory.oom_control; do ` +
	`[ -r /sys/fs/cgroup/$f ] && while read -r l; do echo "CG $f $l"; done < /sys/fs/cgroup/$f; done; true`

// cgroupRead parses cgroupScript's lines from out: file -> lines.
func cgroupRead(out string) map[string][]string {
	seen := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.SplitN(l, " ", 3)
		if len(f) == 3 && f[0] == "CG" {
			seen[f[1]] = append(seen[f[1]], f[2])
		}
	}
	return seen
}

// cgroupCount is the number after key in one of file's "key N" lines
// (pids.events' "max", memory.events' "oom_kill"), or -1.
func cgroupCount(seen map[string][]string, file, key string) int64 {
	for _, l := range seen[file] {
		if k, v, ok := strings.Cut(l, " "); ok && k == key {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// cgroupLimits checks that the container's cgroup holds the limits the
// runner asked for (pids and memory, swap included), read from inside,
// under cgroup v2's names or v1's.
func cgroupLimits(t *testing.T, seen map[string][]string, pids, memoryMB int64) {
	t.Helper()
	one := func(files ...string) string {
		for _, f := range files {
			if v := seen[f]; len(v) == 1 {
				return v[0]
			}
		}
		return ""
	}
	if got := one("pids.max", "pids/pids.max"); got != strconv.FormatInt(pids, 10) {
		t.Errorf("the container's pids.max is %q, want %d (the limit asked for): %v", got, pids, seen)
	}
	if got := one("memory.max", "memory/memory.limit_in_bytes"); got != strconv.FormatInt(memoryMB<<20, 10) {
		t.Errorf("the container's memory limit is %q, want %d: %v", got, memoryMB<<20, seen)
	}
	// cgroup v2 counts swap apart: none beyond the memory limit.
	if v, ok := seen["memory.swap.max"]; ok && (len(v) != 1 || v[0] != "0") {
		t.Errorf("the container's memory.swap.max is %q, want 0 (memory_mb counts swap)", v)
	}
}
