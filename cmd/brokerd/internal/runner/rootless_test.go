package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// rootlessUser is the unprivileged user the rootless test creates, with
// subordinate ids, if it does not exist.
const rootlessUser = "bxrootless"

// TestRootlessCgroupsV1FailsClosed runs the runner against a rootless
// Podman service on a cgroups v1 host, where Podman creates containers
// without their memory and pids limits and only warns. brokerd's startup
// check and every call must refuse, with the runbook pointer, and leave
// no container behind.
func TestRootlessCgroupsV1FailsClosed(t *testing.T) {
	podmantest.Require(t)
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		t.Skip("cgroups v2 host: rootless Podman can enforce the limits here, so there is no lost isolation to refuse")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the rootless test creates a user and must run as root in CI")
		}
		t.Skip("needs root to create an unprivileged user with subordinate ids")
	}
	uid, gid := ensureUser(t)
	dir, err := os.MkdirTemp("", "rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("rm", "-rf", dir).Run() })
	xdg := filepath.Join(dir, "xdg")
	os.Mkdir(xdg, 0o700)
	svc, err := podmantest.Start(podmantest.Options{
		Attr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}},
		Dir:  dir, Env: []string{"XDG_RUNTIME_DIR=" + xdg, "USER=" + rootlessUser, "LOGNAME=" + rootlessUser},
	})
	if err != nil {
		t.Fatalf("rootless podman service: %v", err)
	}
	t.Cleanup(func() {
		if err := svc.Stop(); err != nil {
			t.Error(err)
		}
	})
	p := newRunner(t, svc, svc.StubImage(t), nil)
	// The service runs as another user than this test (root, standing in
	// for brokerd), which a deployment does not do: the seccomp profile
	// goes where the service's user can read it.
	prof, err := os.MkdirTemp("", "rootless-profile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(prof) })
	os.Chmod(prof, 0o755)
	if p.cfg.seccompProfile, err = writeProfile(prof); err != nil {
		t.Fatal(err)
	}
	err = p.Check(context.Background())
	if !errors.Is(err, ErrIsolation) || !strings.HasSuffix(err.Error(), "; see docs/runbook.md#runner-isolation-lost") ||
		!strings.Contains(err.Error(), "not supported") {
		t.Fatalf("Check on rootless cgroups v1 = %v, want the isolation-lost refusal with Podman's warning", err)
	}
	t.Logf("refused: %v", err)
	// Granted paths the rootless user can reach, as a real deployment's,
	// outside the service's directory, which holds its socket (protected).
	work, err := os.MkdirTemp("", "rootless-work-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	os.Chmod(work, 0o755)
	os.WriteFile(filepath.Join(work, "f"), []byte("x"), 0o644)
	os.Chown(work, uid, gid)
	for _, d := range []struct {
		tool string
		args any
	}{
		{"read_file", map[string]string{"path": work + "/f"}},
		{"write_file", map[string]string{"path": work + "/g", "content": "x"}},
		{"shell", map[string]string{"command": "true", "workdir": work}},
	} {
		dec := decide(t, autoGrant("g", d.tool, []string{work}), d.tool, d.args)
		if out, err := p.Run(context.Background(), dec); !errors.Is(err, ErrIsolation) {
			t.Errorf("%s on rootless cgroups v1 = %+v, %v; want refused", d.tool, out, err)
		}
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}

// ensureUser creates rootlessUser with subordinate id ranges unless it
// exists, and returns its ids.
func ensureUser(t *testing.T) (int, int) {
	t.Helper()
	if _, err := user.Lookup(rootlessUser); err != nil {
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", rootlessUser).CombinedOutput()
		if err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
	}
	u, err := user.Lookup(rootlessUser)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), rootlessUser+":") {
			fl, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			fl.WriteString(rootlessUser + ":3000000:65536\n")
			fl.Close()
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}
