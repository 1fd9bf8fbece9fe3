package broker

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
)

// TestStartupChecksPodmanAndImage: with a [runner] table brokerd does not
// start when Podman does not answer or the image is not there, each with
// its runbook entry: no service or no image is a refusal (exit 2, which
// systemd does not retry: the owner must act); a service that accepts
// but does not answer in time is a failure (exit 1, which systemd
// retries: at boot or under load it may answer next time).
func TestStartupChecksPodmanAndImage(t *testing.T) {
	svc := podmantest.Require(t)
	old := runner.StartupTimeout
	runner.StartupTimeout = 2 * time.Second
	t.Cleanup(func() { runner.StartupTimeout = old })
	missing := "sha256:" + strings.Repeat("0", 64)
	for _, tt := range []struct {
		name, socket, image, want string
		refused                   bool
	}{
		{"no service", filepath.Join(t.TempDir(), "none.sock"), missing, "see docs/runbook.md#podman-unavailable", true},
		{"silent service", silentSocket(t), missing, "see docs/runbook.md#podman-unavailable", false},
		{"no image", svc.Socket, missing, "see docs/runbook.md#tool-image-missing", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := brokerd.Config{StateDir: filepath.Join(root, "state"), GrantsDir: filepath.Join(root, "grants"),
				BrokerSocketDir: filepath.Join(root, "broker"), AdminSocketDir: filepath.Join(root, "admin"),
				Runner: &brokerd.Runner{PodmanSocket: tt.socket, ToolImage: tt.image}}
			os.MkdirAll(filepath.Join(cfg.StateDir, "broker", "audit"), 0o700)
			for _, d := range []string{cfg.BrokerSocketDir, cfg.AdminSocketDir} {
				sockets.MakeDir(d, 0o700)
			}
			r, err := cfg.Runner.Check()
			if err != nil {
				t.Fatal(err)
			}
			cfg.Runner = &r
			err = Run(context.Background(), slog.New(slog.DiscardHandler), cfg, false)
			if err == nil || !strings.HasSuffix(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error ending %q", err, tt.want)
			}
			if got := errors.Is(err, daemon.ErrRefused); got != tt.refused {
				t.Errorf("Run = %v: refused %v, want %v", err, got, tt.refused)
			}
		})
	}
}

// silentSocket is a Unix socket that accepts and never answers: a
// Podman service too busy to.
func silentSocket(t *testing.T) string {
	dir, err := os.MkdirTemp("", "silent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return l.Addr().String()
}
