package stack

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/netns"
)

// TestStackRolesContained: `bxctl up` as root runs every role under its
// own uid and gid from users.toml with no supplementary groups, and
// loopd in a network namespace whose one interface is lo, from which no
// listener on the host answers.
func TestStackRolesContained(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root (CI runs as root)")
		}
		t.Skip("needs root: bxctl up gives each role its own user only as root")
	}
	bin, state, srv := stack(t, 131072)
	up(t, bin, state, srv)
	u, err := layout.LoadUsers(state)
	if err != nil || u.Single() {
		t.Fatalf("bxctl up as root left no users.toml: %v", err)
	}
	for _, r := range []string{layout.Inferproxy, layout.Memoryd, layout.Brokerd, layout.Loopd} {
		pid := pidOf(t, filepath.Join(bin, r), state)
		id := u.Of(r)
		status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		uid, gid, groups := field(status, "Uid:"), field(status, "Gid:"), field(status, "Groups:")
		if uid[0] != strconv.Itoa(int(id.UID)) || gid[0] != strconv.Itoa(int(id.GID)) || len(groups) != 0 {
			t.Errorf("%s runs as uid %v gid %v groups %v; want %d, %d and none", r, uid, gid, groups, id.UID, id.GID)
		}
	}
	pid := pidOf(t, filepath.Join(bin, "loopd"), state)
	dev, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	var ifaces []string
	for _, l := range strings.Split(strings.TrimSpace(string(dev)), "\n")[2:] {
		ifaces = append(ifaces, strings.TrimSpace(strings.SplitN(l, ":", 2)[0]))
	}
	if len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Errorf("loopd's interfaces = %v, want [lo]", ifaces)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, host := range []string{"127.0.0.1", hostIP(t)} {
		addr := net.JoinHostPort(host, port)
		if c, err := net.DialTimeout("tcp", addr, time.Second); err != nil {
			t.Fatalf("the host's own listener at %s does not answer the host: %v", addr, err)
		} else {
			c.Close()
		}
		err := netns.In(pid, func() error {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				return errors.New("connected")
			}
			return nil
		})
		if err != nil {
			t.Errorf("from loopd's namespace, the host's listener at %s: %v", addr, err)
		}
	}
}

// field is the values after key in /proc/PID/status.
func field(status []byte, key string) []string {
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, key) {
			return strings.Fields(strings.TrimPrefix(l, key))
		}
	}
	return []string{""}
}

func hostIP(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address on this machine")
	return ""
}

// shareWithBrokerd gives the test's shared rootful Podman socket to
// brokerd's group, as bxctl up does with its own (package layout's
// run/podman): with a user per role brokerd is not root.
func shareWithBrokerd(t *testing.T, sock string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	gid := int(layout.DefaultUsers(layout.ID{}).Of(layout.Brokerd).GID)
	dir := filepath.Dir(sock)
	for _, err := range []error{os.Chown(dir, 0, gid), os.Chmod(dir, 0o750), os.Chown(sock, 0, gid), os.Chmod(sock, 0o660)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o001)
		}
	}
}
