package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/containers/podman/v5/pkg/specgen"
	"golang.org/x/sys/unix"
)

// The startup probe's refusals.
var (
	ErrNoSeccomp    = errors.New("the Podman service reports no seccomp support, so tool containers would run without a syscall filter; brokerd did not start; see docs/runbook.md#podman-no-seccomp")
	ErrProbe        = errors.New("the startup probe container did not run with the isolation brokerd asks for, so brokerd did not start; see docs/runbook.md#runner-probe-differs")
	ErrUserNS       = errors.New("the rootful Podman service could not give the probe container a user namespace of its own (userns=auto needs subordinate ids for the user containers in /etc/subuid and /etc/subgid), so brokerd did not start; see docs/runbook.md#podman-rootful-userns")
	ErrTestnetImage = errors.New("the tool image was built with the test-only boxmaker_testnet tag (its egress proxy may reach private networks), so brokerd did not start; see docs/runbook.md#tool-image-testnet")
)

// testnetMarker is the file images/tool-image writes, holding the build
// tags, when TOOLKIT_TAGS is set.
const testnetMarker = "/etc/boxmaker-tool-tags"

// probeScript prints, from inside a container made like every tool
// container, what its isolation looks like to a process there. It needs
// only sh, cat and the toolkit, which every tool image has; the toolkit
// tries each way of making or entering a namespace (package nsprobe of
// cmd/toolkit).
const probeScript = `echo @status; cat /proc/self/status; echo @uid_map; cat /proc/self/uid_map; ` +
	`echo @net; cat /proc/net/dev; echo @namespaces; /bin/toolkit probe-namespaces; ` +
	`echo @dev; for f in /dev/* /dev/.[!.]*; do { [ -e "$f" ] || [ -L "$f" ]; } && echo "${f#/dev/}"; done; ` +
	`echo @tags; cat ` + testnetMarker + ` 2>/dev/null; echo @end`

// runtimeDev is what the OCI runtime puts in a container's /dev with no
// device asked for: the null, zero, full, random, urandom and tty nodes,
// the pts, shm and mqueue mounts and the standard links. Anything else
// came from the server's configuration. Rootless Podman bind-mounts a
// containers.conf device instead of creating it, so it shows in neither
// inspect's devices nor its mounts: only this listing, from inside,
// finds it.
var runtimeDev = map[string]bool{
	"console": true, "core": true, "fd": true, "full": true, "mqueue": true, "null": true, "ptmx": true, "pts": true,
	"random": true, "shm": true, "stderr": true, "stdin": true, "stdout": true, "tty": true, "urandom": true, "zero": true,
}

// wantNamespaces is what toolkit probe-namespaces must print under the
// runner's seccomp profile (toolProfile): each attempt refused by the
// filter. Without it the kernel answers EINVAL or EBADF (see nsprobe).
var wantNamespaces = map[string]unix.Errno{"unshare": unix.EPERM, "clone": unix.EPERM, "clone3": unix.ENOSYS, "setns": unix.EPERM}

// probe runs probeScript in a container with the tool containers'
// settings and refuses on any difference from what they ask for.
func (p *Podman) probe(conn context.Context) error {
	s := p.cfg.hardened(p.instance, "probe", uint(p.cfg.TimeoutS))
	s.Command = []string{"/bin/sh", "-c", probeScript}
	s.Stdin = ptr(true)
	s.NetNS = specgen.Namespace{NSMode: specgen.NoNetwork}
	id, err := p.create(conn, s)
	if err != nil {
		return userNSRefusal(err, p.cfg.rootless)
	}
	defer p.remove(conn, id)
	t0 := time.Now()
	out, err := p.attachRun(conn, id, nil, 30*time.Second, func() error { return nil }, &t0)
	if err != nil {
		return err
	}
	if out.Exit != 0 || out.Stopped != "" {
		return fail(ErrProbe, fmt.Sprintf("it exited %d (%s): %s", out.Exit, out.Stopped, strings.TrimSpace(out.Stderr)))
	}
	tags, bad := probeDiffers(out.Stdout, !p.cfg.rootless)
	if len(bad) > 0 {
		return fail(ErrProbe, "it differs in: "+strings.Join(bad, ", "))
	}
	if tags != "" && !p.cfg.allowTestnetImage {
		return fail(ErrTestnetImage, fmt.Sprintf("%s says %q", testnetMarker, tags))
	}
	return nil
}

// probeDiffers parses probeScript's output: the image's build tags, and
// what differs from a tool container's isolation (seccomp filtering, no
// new privileges, no capabilities, uid 65534, only a loopback interface,
// no way to make or enter a namespace,
// nothing in /dev but the runtime's own (runtimeDev),
// a user namespace: never the identity uid map, and, rootful, no range
// that reaches the host's root).
func probeDiffers(out string, rootful bool) (tags string, bad []string) {
	sections := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(l, "@"); ok {
			cur = name
			sections[cur] = []string{}
			continue
		}
		if cur != "" && strings.TrimSpace(l) != "" {
			sections[cur] = append(sections[cur], l)
		}
	}
	if _, ok := sections["end"]; !ok {
		return "", []string{"its report is incomplete"}
	}
	status := map[string]string{}
	for _, l := range sections["status"] {
		if k, v, ok := strings.Cut(l, ":"); ok {
			status[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	for k, want := range map[string]string{
		"Seccomp": "2", "NoNewPrivs": "1", "CapEff": "0000000000000000", "CapPrm": "0000000000000000",
		"CapAmb": "0000000000000000", "Uid": "65534 65534 65534 65534", "Gid": "65534 65534 65534 65534",
	} {
		if status[k] != want {
			bad = append(bad, fmt.Sprintf("%s %q (want %q)", k, status[k], want))
		}
	}
	var ifs []string
	if n := sections["net"]; len(n) >= 2 {
		for _, l := range n[2:] {
			name, _, _ := strings.Cut(l, ":")
			ifs = append(ifs, strings.TrimSpace(name))
		}
	}
	if len(ifs) != 1 || ifs[0] != "lo" {
		bad = append(bad, fmt.Sprintf("network interfaces %q (want only lo)", ifs))
	}
	bad = append(bad, namespacesDiffer(sections["namespaces"])...)
	if dev, ok := sections["dev"]; !ok || len(dev) == 0 {
		bad = append(bad, "no /dev listing")
	}
	for _, d := range sections["dev"] {
		if !runtimeDev[strings.TrimSpace(d)] {
			bad = append(bad, fmt.Sprintf("device /dev/%s (want only the runtime's own)", strings.TrimSpace(d)))
		}
	}
	uidMap := make([]string, len(sections["uid_map"]))
	for i, l := range sections["uid_map"] {
		uidMap[i] = strings.Join(strings.Fields(l), " ")
	}
	hostRoot := len(uidMap) == 0
	for _, l := range uidMap {
		f := strings.Fields(l)
		hostRoot = hostRoot || len(f) != 3 || l == "0 0 4294967295" || rootful && f[1] == "0"
	}
	if hostRoot {
		bad = append(bad, fmt.Sprintf("uid map %q (want a user namespace of its own)", uidMap))
	}
	return strings.TrimSpace(strings.Join(sections["tags"], " ")), bad
}

// namespacesDiffer compares toolkit probe-namespaces' lines with
// wantNamespaces: every attempt present once, each with the filter's
// answer.
func namespacesDiffer(lines []string) []string {
	got := map[string]string{}
	for _, l := range lines {
		name, errno, _ := strings.Cut(strings.TrimSpace(l), " ")
		if _, dup := got[name]; dup {
			return []string{fmt.Sprintf("namespace probe %q (a line twice)", lines)}
		}
		got[name] = errno
	}
	var bad []string
	for _, name := range []string{"unshare", "clone", "clone3", "setns"} {
		want := wantNamespaces[name]
		if g, ok := got[name]; !ok {
			bad = append(bad, fmt.Sprintf("namespace probe: no answer for %s (want %s)", name, unix.ErrnoName(want)))
		} else if g != strconv.Itoa(int(want)) {
			bad = append(bad, fmt.Sprintf("namespace probe: %s answered %s (want %d, %s: a tool could make or enter a namespace)", name, g, int(want), unix.ErrnoName(want)))
		}
	}
	if len(got) != len(wantNamespaces) && len(bad) == 0 {
		bad = append(bad, fmt.Sprintf("namespace probe %q (unexpected lines)", lines))
	}
	return bad
}

// userNSRefusal turns Podman's failure to allocate a rootful container's
// user namespace into its own refusal; any other error stays.
func userNSRefusal(err error, rootless bool) error {
	if !rootless && strings.Contains(err.Error(), "not enough unused IDs in user namespace") {
		return fail(ErrUserNS, "Podman: not enough unused IDs in user namespace")
	}
	return err
}
