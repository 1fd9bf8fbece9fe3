package vm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Timeouts under TCG on two shared cores: generous, but bounded, so a
// guest that hangs fails the test instead of eating CI's whole budget.
const (
	BuildTimeout = 20 * time.Minute // a cold build measured about a minute
	BootTimeout  = 5 * time.Minute  // to the agent's first frame; measured under a minute
	ReadyTimeout = 5 * time.Minute  // then to `systemctl is-system-running --wait`
)

// Start builds the guest if the cache lacks it, boots it and waits until
// systemd has finished starting up, and kills it when t ends. Whether it
// runs at all follows the package's invariant: it skips with one line
// unless BOXMAKER_VM=1, skips (outside CI) or fails (with CI set) when
// this machine cannot build or boot a guest, and fails when a guest that
// should boot does not.
func Start(t testing.TB) *Machine {
	t.Helper()
	mayBoot(t)
	m := boot(t)
	t.Cleanup(func() { m.Close() })
	return m
}

// mayBoot skips or fails t as the package's invariant says when this
// machine is not to boot a guest (see [Start]).
func mayBoot(t testing.TB) {
	t.Helper()
	if skip, fail := gate(os.Getenv, Missing()); fail != "" {
		t.Fatal(fail)
	} else if skip != "" {
		t.Skip(skip)
	}
}

// boot builds the guest if the cache lacks it, boots it and waits until
// systemd has finished starting up, failing t if it cannot. The caller
// closes the machine.
func boot(t testing.TB) *Machine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	img, err := Build(ctx, testLog{t})
	if err != nil {
		t.Fatalf("VM test host: build the guest: %v\nsee docs/runbook.md#vm-boot-failed", err)
	}
	if img.Built != "" {
		t.Logf("vm: built %s in %v", img.Built, img.Took.Round(time.Millisecond))
	}
	bctx, bcancel := context.WithTimeout(context.Background(), BootTimeout)
	defer bcancel()
	m, err := Boot(bctx, img)
	if err != nil {
		t.Fatalf("VM test host: %v\nsee docs/runbook.md#vm-boot-failed", err)
	}
	t.Logf("vm: agent ready %v after qemu started", m.Booted.Round(time.Millisecond))
	rctx, rcancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer rcancel()
	began := time.Now()
	r, err := m.Run(rctx, nil, "systemctl", "is-system-running", "--wait")
	if err != nil {
		console := m.ConsoleTail(40)
		m.Close()
		t.Fatalf("VM test host: systemctl is-system-running: %v\nconsole:\n%s\nsee docs/runbook.md#vm-boot-failed", err, console)
	}
	m.Ready = m.Booted + time.Since(began)
	m.State = strings.TrimSpace(r.Stdout)
	t.Logf("vm: systemd %s %v after qemu started", m.State, m.Ready.Round(time.Millisecond))
	return m
}

// gate is [Start]'s decision, given the environment and what this machine
// lacks ([Missing]): a line to skip with, a line to fail with, or neither.
func gate(getenv func(string) string, missing string) (skip, fail string) {
	if getenv("BOXMAKER_VM") != "1" {
		return "VM test host: skipped; set BOXMAKER_VM=1 to run it (make vm; see docs/vm.md)", ""
	}
	if missing == "" {
		return "", ""
	}
	msg := "VM test host: this machine cannot boot the test VM: " + missing + "; see docs/runbook.md#vm-host-unavailable"
	if getenv("CI") != "" {
		return "", msg
	}
	return msg, ""
}

// Missing says what this machine lacks to build and boot the guest, or ""
// when it has everything: root (mmdebstrap and the image's root-owned
// files) and the [Tools].
func Missing() string {
	var why []string
	if os.Geteuid() != 0 {
		why = append(why, "not root")
	}
	for _, tool := range Tools {
		if _, err := exec.LookPath(tool); err != nil {
			why = append(why, tool+" is not installed (checks/vm-setup installs it)")
		}
	}
	return strings.Join(why, ", ")
}

// testLog sends [Build]'s progress lines to t.Log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line != "" {
			l.t.Log(line)
		}
	}
	return len(p), nil
}

// String is one line about the machine for logs.
func (m *Machine) String() string {
	return fmt.Sprintf("vm (agent after %v, systemd %s after %v)", m.Booted, m.State, m.Ready)
}
