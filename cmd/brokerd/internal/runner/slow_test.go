package runner

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

// TestStartupSlowPodmanIsNotARefusal: a Podman service that accepts and
// never answers (busy, or still starting at boot) fails the startup
// steps as ErrPodmanSlow, which brokerd exits 1 on so that systemd
// starts it again (a VM run under load saw brokerd refused for good, its
// unit never restarted, when the probe's attach ran out of time; the
// bindings retry a missing socket until the same deadline, so a service
// not yet started at boot is retried too). A failure within the time is
// still a refusal. The message ends with its runbook entry, once.
func TestStartupSlowPodmanIsNotARefusal(t *testing.T) {
	old := StartupTimeout
	StartupTimeout = 300 * time.Millisecond
	t.Cleanup(func() { StartupTimeout = old })
	dir, err := os.MkdirTemp("", "slow")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "p.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn // accepted, never answered
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	silent, err := New(Config{Runner: brokerd.Runner{PodmanSocket: sock, ToolImage: testImage}}, "i", t.TempDir(), nil, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	_, sweep := silent.Sweep(context.Background())
	check := silent.Check(context.Background())
	for name, err := range map[string]error{"sweep": sweep, "check": check} {
		if !errors.Is(err, ErrPodmanSlow) {
			t.Errorf("%s against a silent service: %v, want ErrPodmanSlow", name, err)
		}
		if err != nil && !strings.HasSuffix(err.Error(), "see docs/runbook.md#podman-unavailable") {
			t.Errorf("%s: %q does not end with its runbook entry", name, err)
		}
	}
	// A failure within the time (a wrong version, no seccomp, a missing
	// image, a probe that differs) stays what it was: a refusal.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := slowIf(ctx, ErrImage); err != ErrImage {
		t.Errorf("a failure within the time became %v", err)
	}
	if strings.Count(check.Error(), "see docs/runbook.md") != 1 {
		t.Errorf("the runbook entry is named more than once: %q", check)
	}
}
