package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

func TestMain(m *testing.M) { os.Exit(podmantest.Main(m)) }

// decide makes a real Decision: grants (TOML [[grant]] tables) decide one
// call, which must come out auto.
func decide(t testing.TB, grants, tool string, args any) policy.Decision {
	t.Helper()
	gs, ps := grant.ParseFile("test.toml", []byte(grants))
	if len(ps) > 0 {
		t.Fatalf("grants: %v", ps)
	}
	set, err := grant.NewSet(gs...)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	d, ask, den := policy.Decide(set, policy.Request{Tool: tool, Arguments: raw}, policy.Session{Taint: dataclass.Private}, time.Now())
	if ask != nil || den != nil {
		t.Fatalf("%s %s: not allowed: ask %v, denial %v", tool, raw, ask != nil, den)
	}
	return d
}

// autoGrant is one auto grant for tool on paths (or hosts for
// http_fetch), with extra key = value lines.
func autoGrant(id, tool string, list []string, extra ...string) string {
	key := "paths"
	if tool == "http_fetch" {
		key = "hosts"
	}
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = `"` + s + `"`
	}
	return "[[grant]]\nid = \"" + id + "\"\ntool = \"" + tool + "\"\n" + key + " = [" + strings.Join(q, ", ") + "]\n" +
		"max_taint = \"secret\"\nmode = \"auto\"\n" + strings.Join(extra, "\n") + "\n"
}

// secrets is a fixed secret table for tests.
func secrets(m map[string]string) func(string) (secret.Value, error) {
	return func(name string) (secret.Value, error) {
		v, ok := m[name]
		if !ok {
			return secret.Value{}, errors.New("no such secret")
		}
		return secret.New([]byte(v)), nil
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newRunner makes a runner against the test service and tool image.
func newRunner(t testing.TB, svc *podmantest.Service, image string, mod func(*Config)) *Podman {
	t.Helper()
	cfg := Config{Runner: brokerd.Runner{PodmanSocket: svc.Socket, ToolImage: image}}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg, "test-"+Instance(t.TempDir()), t.TempDir(), nil, secrets(map[string]string{"TOKEN_A": "value-a-7f3e", "TOKEN_B": "value-b-91c2"}), quiet)
	if err != nil {
		t.Fatal(err)
	}
	// What Check would find: the user namespace mode follows the
	// service (keep-id rootless, auto rootful), for tests that do not
	// run the startup check.
	p.cfg.rootless = svc.Rootless
	return p
}

// run runs d and fails the test on a runner error.
func run(t testing.TB, p *Podman, d policy.Decision) Output {
	t.Helper()
	out, err := p.Run(context.Background(), d)
	if err != nil {
		t.Fatalf("Run(%s): %v", d.Tool(), err)
	}
	return out
}

// leftovers lists the containers a runner's label still names once the
// removals its calls left running after their answers have ended.
func leftovers(t testing.TB, svc *podmantest.Service, p *Podman) []string {
	t.Helper()
	settled(t, p)
	return present(t, svc, p)
}

// settled waits for the removals p's calls left running after their
// answers.
func settled(t testing.TB, p *Podman) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SettleWait)
	defer cancel()
	if err := p.Settle(ctx); err != nil {
		t.Fatalf("Settle: %v", err)
	}
}

// present lists the containers a runner's label names now, without
// waiting for any removal.
func present(t testing.TB, svc *podmantest.Service, p *Podman) []string {
	t.Helper()
	out, err := svc.CLI(nil, "ps", "-a", "-q", "--filter", "label="+LabelInstance+"="+p.instance)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// tripwire listens on addr until the test ends and reports every
// connection it accepts (closing it at once): a test's proof that
// nothing, or something, reached the host.
func tripwire(t *testing.T, network, addr string) (net.Listener, <-chan bool) {
	t.Helper()
	if addr == "0.0.0.0:80" {
		// A fixed port: other test processes on the host take turns.
		return watch(podmantest.ListenPort(t, 80))
	}
	ln, err := net.Listen(network, addr)
	if err != nil && os.Getenv("CI") == "" && errors.Is(err, os.ErrPermission) {
		// The Nix sandbox's build user, or a developer's: port 80 is root's.
		t.Skipf("did not run: %v (needs root or unprivileged ports from 0)", err)
	}
	if err != nil {
		t.Fatalf("listen on %s (the tests run as root, as in CI, or where unprivileged ports start at 0, as in the VM test host): %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return watch(ln)
}

// watch reports each connection ln accepts (and closes) on the channel.
func watch(ln net.Listener) (net.Listener, <-chan bool) {
	accepted := make(chan bool, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case accepted <- true:
			default:
			}
		}
	}()
	return ln, accepted
}
