package runner

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

func TestLifecycleStub(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.StubImage(t), nil)
	dir := t.TempDir()
	os.WriteFile(dir+"/x", []byte("hi"), 0o644)
	d := decide(t, autoGrant("r", "read_file", []string{dir}), "read_file", map[string]string{"path": dir + "/x"})
	out := run(t, p, d)
	t.Logf("%+v", out)
	if !strings.Contains(out.Stdout, "tool=read_file uid=65534") || !strings.Contains(out.Stdout, `{"args":{"path":"`+dir+`/x"}}`) || out.Stderr != "diag\n" || out.Exit != 3 {
		t.Errorf("output = %+v", out)
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}

// TestCancelledCallRemovesItsContainer: brokerd stopping (its context
// cancelled) mid-call still kills and removes the container, before Run
// returns (an error path never leaves the removal for later).
func TestCancelledCallRemovesItsContainer(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.StubImage(t), nil)
	dir := t.TempDir()
	d := decide(t, autoGrant("s", "shell", []string{dir}), "shell", map[string]string{"command": "sleep 60", "workdir": dir})
	p.beforeRemove = func(string) { t.Error("a cancelled call left its container's removal for after its answer") }
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the tool runs.
		for {
			out, _ := svc.CLI(nil, "ps", "-q", "--filter", "status=running", "--filter", "label="+LabelInstance+"="+p.instance)
			if strings.TrimSpace(out) != "" {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	if _, err := p.Run(ctx, d); !errors.Is(err, ErrPodman) || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("Run after cancel = %v", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("a cancelled call took %v", time.Since(start))
	}
	if l := present(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}

// TestMissingImageRefusedPerCall: with the image gone after startup, a
// call fails with tool-image-missing (create only looks in local
// storage; nothing is pulled) and leaves nothing.
func TestMissingImageRefusedPerCall(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, "sha256:"+strings.Repeat("0", 64), nil)
	dir := t.TempDir()
	d := decide(t, autoGrant("s", "shell", []string{dir}), "shell", map[string]string{"command": "true", "workdir": dir})
	if _, err := p.Run(context.Background(), d); !errors.Is(err, ErrImage) || !strings.HasSuffix(err.Error(), "#tool-image-missing") {
		t.Errorf("Run with a missing image = %v", err)
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}
