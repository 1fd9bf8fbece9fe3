package broker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
)

// TestStartupChecksPodmanAndImage: with a [runner] table brokerd refuses
// to start when Podman does not answer or the image is not there, each
// with its runbook entry.
func TestStartupChecksPodmanAndImage(t *testing.T) {
	svc := podmantest.Require(t)
	missing := "sha256:" + strings.Repeat("0", 64)
	for _, tt := range []struct {
		name, socket, image, want string
	}{
		{"no service", filepath.Join(t.TempDir(), "none.sock"), missing, "see docs/runbook.md#podman-unavailable"},
		{"no image", svc.Socket, missing, "see docs/runbook.md#tool-image-missing"},
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
				t.Errorf("Run = %v, want a refusal ending %q", err, tt.want)
			}
		})
	}
}
