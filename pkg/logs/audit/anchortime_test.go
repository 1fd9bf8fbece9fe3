package audit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestAnchorTimeRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "audit_anchor.prom")
	if got, err := ReadAnchorTime(p); err != nil || !got.IsZero() {
		t.Fatalf("no file: %v, %v", got, err)
	}
	at := time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)
	if err := WriteAnchorTime(p, at); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
	if got, err := ReadAnchorTime(p); err != nil || !got.Equal(at) {
		t.Errorf("read %v, %v; want %v", got, err, at)
	}
	for name, text := range map[string]string{"no gauge": "# nothing\n", "not a number": AnchorGauge + " soon\n"} {
		os.WriteFile(p, []byte(text), 0o644)
		if _, err := ReadAnchorTime(p); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAnchorTime(fifo); err == nil {
		t.Error("a FIFO was read")
	}
	link := filepath.Join(dir, "link")
	os.Symlink(p, link)
	if _, err := ReadAnchorTime(link); err == nil {
		t.Error("a link was followed")
	}
}
