package vm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/checks/vm/fakes"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// guest is one booted machine with helpers that fail the test.
type guest struct{ m *Machine }

// sh runs script in the guest and returns its result; only a broken
// channel fails the test here.
func (g guest) sh(t *testing.T, d time.Duration, script string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r, err := g.m.Sh(ctx, script)
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return r
}

// must runs script, which must exit 0, and returns its stdout.
func (g guest) must(t *testing.T, script string) string {
	t.Helper()
	r := g.sh(t, 3*time.Minute, script)
	if r.Exit != 0 {
		t.Fatalf("%s: %s", script, r)
	}
	return r.Stdout
}

// artifacts builds, on the host, what the deployment test copies in: every
// role's image and the tool image (images/role-image), bxctl, and the
// fakes' test binary.
func artifacts(t *testing.T) map[string]string {
	t.Helper()
	root, err := podmantest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := map[string]string{}
	// images.ids, as docs/units.md's build writes it: bxctl install
	// refuses any archive whose ID is not its line's.
	var ids strings.Builder
	for _, r := range append(append([]string{}, layout.Daemons...), units.Tool) {
		p := filepath.Join(dir, r+".tar")
		cmd := exec.Command(filepath.Join(root, "images", "role-image"), r, p)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		id, err := cmd.Output()
		if err != nil {
			t.Fatalf("images/role-image %s: %v\n%s", r, err, stderr.Bytes())
		}
		fmt.Fprintf(&ids, "%s %s\n", r, strings.TrimSpace(string(id)))
		out["/root/images/"+r+".tar"] = p
	}
	out["/root/images/images.ids"] = filepath.Join(dir, "images.ids")
	if err := os.WriteFile(out["/root/images/images.ids"], []byte(ids.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out["/usr/local/bin/bxctl"] = filepath.Join(dir, "bxctl")
	if err := GoBuild(ctx, out["/usr/local/bin/bxctl"], "./cmd/bxctl"); err != nil {
		t.Fatal(err)
	}
	out["/root/fakes.test"] = filepath.Join(dir, "fakes.test")
	if err := GoTest(ctx, out["/root/fakes.test"], "./checks/vm/fakes"); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeployment takes the shared guest with Boxmaker installed by
// `bxctl install` against the fake llama-server and the fake Mattermost
// (the snapshot Deployed, made once a run), and checks the
// deployment as it runs: every role started by systemd under its own
// user, without privileges; loopd and brokerd without a network; every
// unit's exposure within its bound; a chat turn through gatewayd; the bot
// token nowhere in clear; a role killed with SIGKILL restarted; each role
// killed with SIGKILL mid-turn, losing nothing (midturn_test.go). Then it
// plants three faults, one subtest each, and wants the checks above to
// catch every one.
func TestDeployment(t *testing.T) {
	// bxctl install, or its snapshot if an earlier scenario made it: it
	// must exit 0 either way, or no check below runs.
	m, d := deployed(t)
	g := guest{m}
	token := d.token

	t.Run("started", func(t *testing.T) {
		for _, p := range g.started(t, 4*time.Minute) {
			t.Error(p)
		}
	})
	t.Run("network", func(t *testing.T) {
		for _, p := range g.network(t) {
			t.Error(p)
		}
	})
	t.Run("security", func(t *testing.T) {
		for _, p := range g.exposure(t, true) {
			t.Error(p)
		}
	})
	t.Run("chat", func(t *testing.T) {
		r := g.sh(t, 4*time.Minute, "for i in $(seq 900); do [ -s /run/bx-fakes/reply.txt ] && exec cat /run/bx-fakes/reply.txt; sleep 0.2; done; exit 1")
		if r.Exit != 0 || strings.TrimSpace(r.Stdout) != fakes.Answer {
			t.Errorf("gatewayd's answer to the owner's DM = %q (%s), want %q\ngatewayd: %s\nloopd: %s", r.Stdout, r, fakes.Answer,
				g.sh(t, time.Minute, "journalctl -u boxmaker-gatewayd --no-pager -o cat | tail -20").Stdout,
				g.sh(t, time.Minute, "journalctl -u boxmaker-loopd --no-pager -o cat | tail -20").Stdout)
		}
	})
	t.Run("token", func(t *testing.T) {
		for _, p := range g.tokenNowhere(t, token) {
			t.Error(p)
		}
		// The whole disk, every tmpfs and every process's environment
		// and command line: the token may be only where systemd keeps
		// gatewayd's decrypted credential (ramfs, the unit's own) and in
		// the fake Mattermost's record of it (test infrastructure).
		for _, h := range FindCanary(t, m, []byte(token)) {
			if h.Kind == "file" && (strings.HasPrefix(h.Path, "/run/credentials/"+units.UnitName(layout.Gatewayd)+"/") || strings.HasPrefix(h.Path, "/run/bx-fakes/")) {
				continue
			}
			t.Errorf("the bot token is in clear at %s", h)
		}
	})
	t.Run("restart", func(t *testing.T) {
		var probs []string
		for _, role := range layout.Daemons {
			probs = append(probs, g.restarts(t, role)...)
		}
		for _, p := range probs {
			t.Error(p)
		}
	})
	// Each role killed mid-turn, where it takes part (midturn_test.go).
	for _, role := range []string{layout.Gatewayd, layout.Loopd, layout.Inferproxy, layout.Brokerd, layout.Memoryd} {
		t.Run("midturn/"+role, func(t *testing.T) { g.midTurn(t, role) })
	}

	// The planted faults: each must make a check above fail, and the
	// deployment is repaired after each.
	t.Run("fault/socket-dir-group-writable", func(t *testing.T) {
		dir := layout.LoopRun.In(units.StateDir)
		g.must(t, "chmod g+w "+dir+" && systemctl restart "+units.UnitName(layout.Loopd)+" || true")
		probs := g.started(t, 20*time.Second)
		g.must(t, "chmod g-w "+dir+" && systemctl reset-failed "+units.UnitName(layout.Loopd)+"; systemctl restart "+units.UnitName(layout.Loopd))
		if !strings.Contains(strings.Join(probs, "\n"), units.UnitName(layout.Loopd)+" is failed") {
			t.Errorf("with %s group-writable loopd still started: %v", dir, probs)
		}
		t.Logf("caught: %v", probs)
	})
	t.Run("fault/network-left-on", func(t *testing.T) {
		dropin := "/etc/systemd/system/" + units.UnitName(layout.Loopd) + ".d"
		g.must(t, "mkdir -p "+dropin+" && printf '[Service]\\nPrivateNetwork=no\\nRestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\\nIPAddressDeny=\\n' >"+dropin+"/fault.conf && systemctl daemon-reload && systemctl restart "+units.UnitName(layout.Loopd))
		probs := append(g.network(t), g.exposure(t, false)...)
		g.must(t, "rm -r "+dropin+" && systemctl daemon-reload && systemctl restart "+units.UnitName(layout.Loopd))
		if all := strings.Join(probs, "\n"); !strings.Contains(all, "loopd's network namespace") || !strings.Contains(all, "over its bound") {
			t.Errorf("loopd with its network on: the network and exposure checks found %v", probs)
		}
		t.Logf("caught: %v", probs)
	})
	t.Run("fault/credential-in-environment", func(t *testing.T) {
		dropin := "/etc/systemd/system/" + units.UnitName(layout.Gatewayd) + ".d"
		g.must(t, "mkdir -p "+dropin+" && printf '[Service]\\nEnvironment=BOXMAKER_MM_TOKEN=%s\\n' '"+token+"' >"+dropin+"/fault.conf && systemctl daemon-reload && systemctl restart "+units.UnitName(layout.Gatewayd))
		probs := g.tokenNowhere(t, token)
		g.must(t, "rm -r "+dropin+" && systemctl daemon-reload && systemctl restart "+units.UnitName(layout.Gatewayd))
		if !strings.Contains(strings.Join(probs, "\n"), "the token is in the environment of") {
			t.Errorf("the token in gatewayd's environment: the token check found %v", probs)
		}
		t.Logf("caught: %v", probs)
	})
}

// mainPID is unit's main process, or 0.
func (g guest) mainPID(t *testing.T, unit string) int {
	t.Helper()
	n, _ := strconv.Atoi(strings.TrimSpace(g.sh(t, time.Minute, "systemctl show -p MainPID --value "+unit).Stdout))
	return n
}

// started waits up to d for every unit to be active and checks each main
// process runs as its role's uid and gid with no privileges.
func (g guest) started(t *testing.T, d time.Duration) []string {
	t.Helper()
	var bad []string
	ids := layout.DefaultUsers(layout.ID{})
	deadline := time.Now().Add(d)
	for _, r := range layout.Daemons {
		unit := units.UnitName(r)
		for {
			// A refusing role flips between activating and failed;
			// active for two readings a second apart means it runs.
			st := g.sh(t, time.Minute, "a=$(systemctl is-active "+unit+"); sleep 1; b=$(systemctl is-active "+unit+"); echo $a $b").Stdout
			if strings.TrimSpace(st) == "active active" {
				break
			}
			if time.Now().After(deadline) {
				more := ""
				if r == layout.Brokerd {
					more = "\nits user's manager:\n" + g.sh(t, time.Minute, fmt.Sprintf("journalctl _UID=%d --no-pager -o cat | tail -30", ids.Of(r).UID)).Stdout
				}
				bad = append(bad, fmt.Sprintf("%s is %s; journal:\n%s%s", unit, strings.TrimSpace(st),
					g.sh(t, time.Minute, "journalctl -u "+unit+" --no-pager -o cat | tail -12").Stdout, more))
				break
			}
			time.Sleep(2 * time.Second)
		}
		pid := g.mainPID(t, unit)
		if pid == 0 {
			continue
		}
		st := g.sh(t, time.Minute, fmt.Sprintf("grep -E '^(Uid|Gid|Groups|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/%d/status", pid)).Stdout
		id := ids.Of(r)
		for _, want := range []string{
			fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", id.UID, id.UID, id.UID, id.UID),
			fmt.Sprintf("Gid:\t%d\t%d\t%d\t%d", id.GID, id.GID, id.GID, id.GID),
			"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2",
		} {
			if !strings.Contains(st, want) {
				bad = append(bad, fmt.Sprintf("%s (pid %d): /proc status lacks %q:\n%s", unit, pid, want, st))
			}
		}
		// systemd's initgroups lists the role's own group, and no other.
		if g := regexp.MustCompile(`Groups:[ \t]*(.*)\n`).FindStringSubmatch(st); g == nil || (strings.TrimSpace(g[1]) != "" && strings.TrimSpace(g[1]) != fmt.Sprint(id.GID)) {
			bad = append(bad, fmt.Sprintf("%s has supplementary groups:\n%s", unit, st))
		}
	}
	return bad
}

// network checks that loopd and brokerd are in a network namespace of
// their own, holding only loopback, and the others in the host's.
func (g guest) network(t *testing.T) []string {
	t.Helper()
	var bad []string
	host := strings.TrimSpace(g.must(t, "readlink /proc/1/ns/net"))
	for _, r := range layout.Daemons {
		pid := g.mainPID(t, units.UnitName(r))
		if pid == 0 {
			bad = append(bad, r+" is not running")
			continue
		}
		ns := strings.TrimSpace(g.sh(t, time.Minute, fmt.Sprintf("readlink /proc/%d/ns/net", pid)).Stdout)
		own := r == layout.Loopd || r == layout.Brokerd
		if own == (ns == host) {
			bad = append(bad, fmt.Sprintf("%s's network namespace is %s, the host's %s; want its own: %v", r, ns, host, own))
		}
		if own {
			links := strings.Fields(g.sh(t, time.Minute, fmt.Sprintf("nsenter -t %d -n ip -o link | cut -d: -f2", pid)).Stdout)
			if len(links) != 1 || links[0] != "lo" {
				bad = append(bad, fmt.Sprintf("%s's network namespace holds %v, want lo only", r, links))
			}
		}
	}
	return bad
}

// exposure checks each unit's systemd-analyze security level against its
// recorded bound (logging the figures when log is set).
func (g guest) exposure(t *testing.T, log bool) []string {
	t.Helper()
	var bad []string
	for _, u := range units.Table() {
		out := g.sh(t, 2*time.Minute, "systemd-analyze security --no-pager "+u.Name).Stdout
		e, err := ParseExposure(out, u.Name)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if log {
			t.Logf("systemd-analyze security: %s (bound %d.%d)", e, u.ExposureMax/10, u.ExposureMax%10)
		}
		if e.Tenths > u.ExposureMax {
			bad = append(bad, fmt.Sprintf("%s is over its bound %d.%d:\n%s", e, u.ExposureMax/10, u.ExposureMax%10, out))
		}
	}
	return bad
}

// tokenNowhere checks that the bot token is in no process's environment,
// no unit's settings, and not in clear in its credential file or the
// deployment's files.
func (g guest) tokenNowhere(t *testing.T, token string) []string {
	t.Helper()
	var bad []string
	if r := g.sh(t, time.Minute, "grep -laF '"+token+"' /proc/[0-9]*/environ 2>/dev/null"); strings.TrimSpace(r.Stdout) != "" {
		bad = append(bad, "the token is in the environment of "+strings.Join(strings.Fields(r.Stdout), " "))
	}
	for _, r := range layout.Daemons {
		if env := strings.TrimSpace(g.sh(t, time.Minute, "systemctl show -p Environment --value "+units.UnitName(r)).Stdout); env != "" {
			bad = append(bad, units.UnitName(r)+" has Environment="+env)
		}
	}
	if r := g.sh(t, 2*time.Minute, "grep -rlaF '"+token+"' /etc/boxmaker /etc/systemd /var/lib/boxmaker /usr/local/lib/boxmaker /root/gatewayd.toml 2>/dev/null"); strings.TrimSpace(r.Stdout) != "" {
		bad = append(bad, "the token is in clear in "+strings.Join(strings.Fields(r.Stdout), " "))
	}
	return bad
}

// restarts kills role's main process with SIGKILL and wants systemd to
// start it again.
func (g guest) restarts(t *testing.T, role string) []string {
	t.Helper()
	unit := units.UnitName(role)
	old := g.mainPID(t, unit)
	if old == 0 {
		return []string{unit + " is not running"}
	}
	g.must(t, fmt.Sprintf("kill -9 %d", old))
	pid, err := g.respawned(t, role, old)
	if err != nil {
		return []string{err.Error()}
	}
	n := strings.TrimSpace(g.sh(t, time.Minute, "systemctl show -p NRestarts --value "+unit).Stdout)
	t.Logf("%s: pid %d killed, pid %d running, NRestarts=%s", unit, old, pid, n)
	return nil
}
