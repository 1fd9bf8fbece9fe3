package vm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/mcptest"
	"wntrmute.dev/boxmaker/checks/podmantest"
)

// runnerDir is where the runner's test binary, the tool image tars and
// the tests' working directory go in the guest.
const runnerDir = "/srv/tests/runner"

// mustPass are the runner's real-container tests (and the escape list's
// subtests) that must report PASS in the guest: each needs Podman, so a
// skip or a missing line would mean it proved nothing there.
var mustPass = []string{
	"TestEachToolFreshContainer", "TestEscapesContained",
	"TestEscapesContained/path_outside_the_mounts", "TestEscapesContained/write_through_a_read-only_grant",
	"TestEscapesContained/network_without_a_host", "TestEscapesContained/user_namespace",
	"TestEscapesContained/fork_bomb", "TestEscapesContained/memory_limit", "TestEscapesContained/time_limit",
	"TestEscapesContained/100_MB_of_stdout", "TestEscapesContained/setuid_binary",
	"TestSecretsStayInTheirCall", "TestEgressProxyRefusesPrivateNames", "TestEgressProxyRefusesLiteralsAndPrivateNames",
	"TestEgressRedirectRebound", "TestEgressRedirects", "TestCheckProbesIsolation", "TestCheckRefusesTestnetImage",
	"TestSwappedMountNeverRuns", "TestRootfulCallsGetTheirOwnUsers", "TestLifecycleStub",
	"TestCancelledCallRemovesItsContainer", "TestMissingImageRefusedPerCall", "TestWritableCallExcludesOthers",
	"TestCancelledCreateLeavesNothing", "TestProtectedPathsAreNeverMounted", "TestEncodedSecretRedactedInACall",
}

// maySkip are the runner's tests that have nothing to prove on a rootless
// cgroup v2 host, with why.
var maySkip = map[string]string{
	"TestRootlessCgroupsV1FailsClosed": "it proves the refusal on cgroups v1, where rootless limits are lost",
}

// TestRootlessRunner, on the shared guest as booted (Fresh), runs
// brokerd's runner tests (cmd/brokerd/internal/runner,
// built with brokerd's tags, static) inside the guest as the rootless
// user against that user's own Podman socket, so the runner takes its
// rootless mode (keep-id) under cgroup v2 with delegated controllers:
// the escape list (fork bomb and memory hog read from the container's
// cgroup, namespaces refused, no network, read-only grants, swapped
// mounts, protected paths) and the egress proxy's tests, every one of
// which must pass there.
func TestRootlessRunner(t *testing.T) {
	m := shared.Use(t, Fresh, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	root, err := podmantest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "cmd", "brokerd", "tags.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tags := strings.Fields(string(b))
	tmp := t.TempDir()
	began := time.Now()
	files := map[string]string{
		"runner.test":      filepath.Join(tmp, "runner.test"),
		"tool.tar":         filepath.Join(tmp, "tool.tar"),
		"tool-testnet.tar": filepath.Join(tmp, "tool-testnet.tar"),
	}
	// The MCP tests' server: the guest has no Go toolchain to build it.
	files["mcp-test-server"] = mcptest.BuildServer(t, tmp)
	if err := GoTest(ctx, files["runner.test"], "./cmd/brokerd/internal/runner", tags...); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]string{"tool.tar": "", "tool-testnet.tar": "boxmaker_testnet"} {
		cmd := exec.CommandContext(ctx, filepath.Join(root, "images", "tool-image"), files[name])
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "TOOLKIT_TAGS="+env)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("images/tool-image %s: %v: %s", name, err, out)
		}
	}
	t.Logf("built the runner's test binary and the two tool images in %v", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	for name, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Put(ctx, runnerDir+"/"+name, 0o755, b); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("copied them in in %v", time.Since(began).Round(time.Millisecond))

	// As root: the tests' listeners take port 80 (the egress tests'
	// URLs carry no port), so unprivileged ports start at 0 here; the
	// guest has no network device, so a dummy interface gives it a host
	// address other than loopback for the egress container to reach
	// (runner's hostSide); and a containers.conf for the services the
	// tests start themselves (the guest's, plus an empty [containers]
	// table the hostile variants add to).
	setup := `set -e
sysctl -q -w net.ipv4.ip_unprivileged_port_start=0
ip link add bx0 type dummy && ip addr add 10.99.0.1/24 dev bx0 && ip link set bx0 up
{ cat /etc/containers/containers.conf /etc/containers/containers.conf.d/*.conf; printf '[containers]\n'; } >` + runnerDir + `/containers.conf
install -d -o rootless -g rootless ` + runnerDir + `/work
for i in $(seq 120); do [ -S /run/user/1000/podman/podman.sock ] && exit 0; sleep 1; done; echo no podman socket >&2; exit 1`
	if r, err := m.Sh(ctx, setup); err != nil || r.Exit != 0 {
		t.Fatalf("setting up the guest for the runner's tests: %v %s", err, r)
	}
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/rootless", "USER=rootless", "LOGNAME=rootless",
		"XDG_RUNTIME_DIR=/run/user/1000", "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",
		"CI=1", // a test that cannot reach Podman fails, never skips
		podmantest.SocketEnv + "=" + podmanSock,
		"BOXMAKER_PODMAN=/usr/local/bin/podman", "BOXMAKER_PODMAN_CONF=" + runnerDir + "/containers.conf",
		"BOXMAKER_TOOL_TAR=" + runnerDir + "/tool.tar", "BOXMAKER_TESTNET_TOOL_TAR=" + runnerDir + "/tool-testnet.tar",
		mcptest.ServerEnv + "=" + runnerDir + "/mcp-test-server",
	}
	// BOXMAKER_VM_RUNNER_RUN narrows the run to the tests it matches
	// (-test.run), for working on one of them; the full list is then not
	// checked, and the test says so.
	only := os.Getenv("BOXMAKER_VM_RUNNER_RUN")
	args := " -test.v -test.count=1 -test.timeout=35m"
	if only != "" {
		args += " -test.run '" + strings.ReplaceAll(only, "'", "") + "'"
	}
	began = time.Now()
	r, err := m.Sh(ctx, "cd "+runnerDir+"/work && runuser -u rootless -- env -i "+strings.Join(env, " ")+
		" "+runnerDir+"/runner.test"+args+" 2>&1")
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	out := r.Stdout + r.Stderr
	for _, l := range strings.Split(out, "\n") {
		if regexp.MustCompile(`^\s*(--- (FAIL|SKIP)|\S+_test\.go:\d+: (fork bomb|memory|rootless call|refused|targets|host ranges))`).MatchString(l) {
			t.Log(strings.TrimSpace(l))
		}
	}
	t.Logf("the runner's tests in the guest, rootless: exit %d in %v", r.Exit, took.Round(time.Second))
	if r.Exit != 0 || !strings.Contains(out, "\nPASS\n") {
		t.Errorf("the runner's tests failed in the guest (exit %d); their output:\n%s", r.Exit, out)
	}
	if only != "" {
		t.Logf("BOXMAKER_VM_RUNNER_RUN=%s: only those tests ran; the list of tests that must pass was not checked", only)
		return
	}
	for _, name := range notPassed(out, mustPass) {
		t.Errorf("%s did not pass in the guest", name)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*--- SKIP: (\S+)`).FindAllStringSubmatch(out, -1) {
		if _, ok := maySkip[m[1]]; !ok {
			t.Errorf("%s skipped in the guest: a real-container test must run there", m[1])
		}
	}
}

// notPassed lists the names of want that a go test -v output does
// not report as passed ("--- PASS: name (").
func notPassed(out string, want []string) []string {
	var missing []string
	for _, name := range want {
		if !regexp.MustCompile(`(?m)^\s*--- PASS: ` + regexp.QuoteMeta(name) + ` \(`).MatchString(out) {
			missing = append(missing, name)
		}
	}
	return missing
}
