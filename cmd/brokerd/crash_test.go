package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func TestMain(m *testing.M) { os.Exit(podmantest.Main(m)) }

// TestCrashMidCallLeavesNothing kills brokerd (SIGKILL) while a tool
// container runs, shows the container outlived it, restarts brokerd and
// shows that its startup removed the container before it served again.
func TestCrashMidCallLeavesNothing(t *testing.T) {
	svc := podmantest.Require(t)
	image := svc.StubImage(t)
	bin := filepath.Join(t.TempDir(), "brokerd")
	tags, _ := os.ReadFile("tags.txt")
	build := exec.Command("go", "build", "-tags", strings.Join(strings.Fields(string(tags)), ","), "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	work := t.TempDir()
	state := roletest.State(t, map[string]string{"brokerd": fmt.Sprintf("[runner]\npodman_socket = %q\ntool_image = %q\n", svc.Socket, image)})
	os.WriteFile(filepath.Join(layout.Grants.In(state), "g.toml"), []byte(fmt.Sprintf(
		"[[grant]]\nid = \"sh\"\ntool = \"shell\"\npaths = [%q]\nmax_taint = \"secret\"\nmode = \"auto\"\n", work)), 0o600)
	cfg := layout.ConfigPath(state, "brokerd")
	label := "label=" + runner.LabelInstance + "=" + runner.Instance(state)
	ps := func() []string {
		out, err := svc.CLI(nil, "ps", "-a", "-q", "--filter", label)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(out)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-config", cfg)
		var log strings.Builder
		cmd.Stderr = &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for i := 0; ; i++ {
			if _, err := os.Stat(layout.Socket(state, &wire.Admin)); err == nil {
				return cmd
			}
			if i > 600 {
				t.Fatalf("brokerd did not start:\n%s", log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := start()
	c := sockettest.Dial(t, &wire.Broker, layout.Socket(state, &wire.Broker))
	c.Send(&wire.ToolRequest{Session: "s1", CallID: "c1", Tool: "shell", Arguments: []byte(fmt.Sprintf(`{"command":"sleep 60","workdir":%q}`, work))})
	for i := 0; len(ps()) == 0; i++ {
		if i > 100 {
			t.Fatal("no tool container appeared")
		}
		time.Sleep(100 * time.Millisecond)
	}
	first.Process.Kill()
	first.Wait()
	if left := ps(); len(left) != 1 {
		t.Fatalf("after SIGKILL: containers %v, want the running one left behind", left)
	}
	os.Remove(layout.Socket(state, &wire.Admin))
	start()
	if left := ps(); len(left) != 0 {
		t.Errorf("after restart: containers %v are still there", left)
	}
}
