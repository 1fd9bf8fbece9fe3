package vm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// TestBrokerdUserManager takes the installed deployment as
// TestDeployment does (the snapshot Deployed) and checks brokerd's mount namespace: of its user's runtime directory
// it sees only its Podman socket's directory, so it cannot reach its
// user manager (the bus, systemd/private) to start a transient service
// outside its sandbox (systemd-run --user), nor the system bus; every
// unit stays within its network and exposure bounds; and its Podman
// still answers there (brokerd's startup check runs a probe
// container through it, so "active" means it does). Each hidden path is
// first shown to exist outside brokerd's namespace, and systemd-run
// --user to work there as brokerd's user, so the check cannot pass
// vacuously.
func TestBrokerdUserManager(t *testing.T) {
	m, _ := deployed(t)
	g := guest{m}
	for _, p := range g.started(t, 4*time.Minute) {
		t.Error(p)
	}
	// The tmpfs and binds keep brokerd without a network and within its
	// exposure bound (TestDeployment's checks, on this guest).
	for _, p := range append(g.network(t), g.exposure(t, true)...) {
		t.Error(p)
	}
	for _, p := range g.userManager(t) {
		t.Error(p)
	}

	// The planted fault: a drop-in that empties TemporaryFileSystem=
	// gives brokerd its runtime directory back, and the check must say so.
	t.Run("fault/runtime-dir-visible", func(t *testing.T) {
		unit := units.UnitName(layout.Brokerd)
		dropin := "/etc/systemd/system/" + unit + ".d"
		g.must(t, "mkdir -p "+dropin+" && printf '[Service]\\nTemporaryFileSystem=\\n' >"+dropin+"/fault.conf && systemctl daemon-reload && systemctl restart "+unit)
		g.started(t, 2*time.Minute)
		probs := g.userManager(t)
		g.must(t, "rm -r "+dropin+" && systemctl daemon-reload && systemctl restart "+unit)
		if all := strings.Join(probs, "\n"); !strings.Contains(all, "brokerd's namespace holds") || !strings.Contains(all, "started a transient service") {
			t.Errorf("brokerd with its runtime directory visible: the check found %v", probs)
		}
		t.Logf("caught: %v", probs)
		for _, p := range g.userManager(t) {
			t.Errorf("repaired: %s", p)
		}
	})

	// brokerd's user manager and runtime directory made anew while
	// brokerd runs (linger turned off and on, or an owner's restart): the
	// host mounts a fresh /run/user/61004, with its bus, and brokerd's
	// view must still hold only its Podman directory.
	t.Run("user-manager-restarted", func(t *testing.T) {
		id := layout.DefaultUsers(layout.ID{}).Of(layout.Brokerd)
		before := g.mainPID(t, units.UnitName(layout.Brokerd))
		g.must(t, fmt.Sprintf("systemctl stop user@%d.service user-runtime-dir@%d.service && systemctl start user@%d.service", id.UID, id.UID, id.UID))
		for _, p := range g.started(t, 2*time.Minute) {
			t.Error(p)
		}
		if after := g.mainPID(t, units.UnitName(layout.Brokerd)); after == before {
			t.Errorf("brokerd (pid %d) kept its namespace across its user manager's restart", before)
		}
		for _, p := range g.userManager(t) {
			t.Error(p)
		}
	})
}

// userManager checks brokerd's mount namespace as TestBrokerdUserManager
// says, returning one line per breach.
func (g guest) userManager(t *testing.T) []string {
	t.Helper()
	var bad []string
	pid := g.mainPID(t, units.UnitName(layout.Brokerd))
	if pid == 0 {
		return []string{"brokerd is not running"}
	}
	id := layout.DefaultUsers(layout.ID{}).Of(layout.Brokerd)
	rt := units.RuntimeDir(layout.Brokerd)
	as := fmt.Sprintf("runuser -u %s -- env XDG_RUNTIME_DIR=%s DBUS_SESSION_BUS_ADDRESS=unix:path=%s/bus ", units.UserName(layout.Brokerd), rt, rt)
	inside := fmt.Sprintf("nsenter -t %d -m -S %d -G %d -- env XDG_RUNTIME_DIR=%s DBUS_SESSION_BUS_ADDRESS=unix:path=%s/bus ", pid, id.UID, id.GID, rt, rt)

	for _, p := range []string{rt + "/bus", rt + "/systemd/private", "/run/dbus/system_bus_socket"} {
		if r := g.sh(t, time.Minute, "test -S "+p); r.Exit != 0 {
			bad = append(bad, fmt.Sprintf("%s is no socket even outside brokerd's namespace (%s): the check would pass vacuously", p, r))
		}
		if r := g.sh(t, time.Minute, inside+"sh -c 'test -e "+p+"'"); r.Exit == 0 {
			bad = append(bad, "brokerd's namespace holds "+p)
		}
	}
	if got := strings.Fields(g.sh(t, time.Minute, inside+"ls -A "+rt).Stdout); len(got) != 1 || got[0] != "podman" {
		bad = append(bad, fmt.Sprintf("brokerd sees %v in %s, want only podman", got, rt))
	}
	if r := g.sh(t, 2*time.Minute, as+"systemd-run --user --wait --quiet true"); r.Exit != 0 {
		bad = append(bad, fmt.Sprintf("systemd-run --user as brokerd's user on the host failed (%s): the check would pass vacuously", r))
	}
	if r := g.sh(t, 2*time.Minute, inside+"systemd-run --user --wait --quiet true"); r.Exit == 0 {
		bad = append(bad, "from brokerd's namespace, systemd-run --user started a transient service outside its sandbox")
	} else {
		t.Logf("systemd-run --user from brokerd's namespace refused: %s", strings.TrimSpace(r.Stderr))
	}
	// The Podman API answers on the socket brokerd's config names, from
	// inside its namespace (the remote client, as brokerd's runner is).
	// The CLI (not brokerd's bindings) makes a directory in its runtime
	// directory: give it brokerd's private /tmp.
	if r := g.sh(t, 2*time.Minute, inside+"HOME=/tmp XDG_RUNTIME_DIR=/tmp /usr/local/bin/podman --remote --url unix://"+units.PodmanSocket()+" version --format '{{.Server.Version}}'"); r.Exit != 0 || !strings.HasPrefix(strings.TrimSpace(r.Stdout), "5.") {
		bad = append(bad, fmt.Sprintf("Podman's API from brokerd's namespace: %s", r))
	}
	return bad
}
