package status

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestStatusBoundedWithAFIFO: an audit file of today that is a FIFO
// holds neither report.Collect nor status past its bound.
func TestStatusBoundedWithAFIFO(t *testing.T) {
	state := t.TempDir()
	dir := layout.Audit.In(state)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := syscall.Mkfifo(filepath.Join(dir, now.UTC().Format("2006-01-02")+".jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	const probe, total = 200 * time.Millisecond, 500 * time.Millisecond
	done := make(chan *Status, 1)
	go func() { done <- Run(context.Background(), Options{State: state, Probe: probe, Total: total, Now: now}) }()
	select {
	case st := <-done:
		if st.TodayPrefillUS != 0 {
			t.Errorf("today's prefill %d from a FIFO", st.TodayPrefillUS)
		}
	case <-time.After(total + 3*time.Second):
		t.Fatal("status is still waiting past its bound")
	}
}
