package broker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestRefusesToStartOnATruncatedLog: with the day's audit file deleted,
// brokerd started again at seq 1 with its session state still on disk,
// without a word (issue 13 item 2). Now it refuses, until the owner
// adopts the log as it is (--adopt-audit-head).
func TestRefusesToStartOnATruncatedLog(t *testing.T) {
	h := start(t, grants)
	result(t, h.call(t, "read_file", `{"path":"/etc/shadow"}`))
	h.stop()
	auditDir := filepath.Join(h.cfg.StateDir, "broker", "audit")
	files, _ := filepath.Glob(filepath.Join(auditDir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("audit files = %v", files)
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	err := Run(context.Background(), log, h.cfg, false)
	if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#audit-truncated") || !strings.Contains(err.Error(), "ends at seq 0, but brokerd wrote up to seq 1") {
		t.Fatalf("Run on a log whose day file was deleted = %v, want audit-truncated", err)
	}
	if err := Run(context.Background(), log, h.cfg, true); err == nil || !strings.Contains(err.Error(), "audit-truncated") {
		t.Fatalf("Run --accept-break on a truncated log = %v, want audit-truncated", err)
	}
	adoptAndStart(t, h, AdoptAuditHead)
}

// adoptAndStart runs the owner's adoption and checks brokerd then starts.
func adoptAndStart(t *testing.T, h *harness, adopt func(*slog.Logger, brokerd.Config) error) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if err := adopt(log, h.cfg); err != nil {
		t.Fatalf("adopt = %v", err)
	}
	stop := sockettest.Start(t, "brokerd", filepath.Join(h.cfg.AdminSocketDir, wire.Admin.Name), func(ctx context.Context) error {
		return Run(ctx, log, h.cfg, false)
	})
	stop()
}
