package broker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
)

// TestRefusesToStartOnACutConsultLog: the consult log's newest lines
// (here a consult that failed before its container ran: a request and
// its error, and no audit result to show them) cut off used to go
// unnoticed; brokerd now refuses to start, and starts again once the
// owner adopts the log as it is (--adopt-consult-head), which it refuses
// while brokerd runs.
func TestRefusesToStartOnACutConsultLog(t *testing.T) {
	h := start(t, grants)
	if err := AdoptConsultHead(slog.New(slog.DiscardHandler), h.cfg); err == nil || !strings.Contains(err.Error(), "held by another process") {
		t.Errorf("AdoptConsultHead while brokerd runs = %v", err)
	}
	h.stop()
	dir := layout.ConsultLog.In(h.cfg.StateDir)
	w, err := consultlog.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("a", 64)
	rseq, _, err := w.Request(consultlog.Request{Session: "s1", Decision: 1, DecisionSHA256: hash, Grant: consultlog.GrantRef{ID: "c", SHA256: hash},
		Model: "m", URL: "https://api.example.com/v1/chat/completions", Body: `{"q":1}`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Response(consultlog.Response{Request: rseq, Error: "the call could not be run: create container: no space left on device"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := os.WriteFile(filepath.Join(dir, consultlog.FileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	err = Run(context.Background(), log, h.cfg, false)
	if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#consult-truncated") || !strings.Contains(err.Error(), "ends at seq 0, but brokerd wrote up to seq 2") {
		t.Fatalf("Run on a cut consult log = %v, want consult-truncated", err)
	}
	adoptAndStart(t, h, AdoptConsultHead)
}
