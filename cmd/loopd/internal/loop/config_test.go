package loop

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
)

// TestConfigDerived: what loopd derives from a loaded loopd.toml (the
// loader's own checks are package roleconf/loopd's tests).
func TestConfigDerived(t *testing.T) {
	c, _, err := loopd.Load("../../../../deploy/loopd.toml", "/var/lib/boxmaker")
	if err != nil {
		t.Fatalf("deploy/loopd.toml: %v", err)
	}
	if l := limits(c); l.MaxCalls != 12 || l.RepeatLimit != 3 || l.ResultCap != 16384 {
		t.Errorf("limits = %+v", l)
	}
	p := filepath.Join(t.TempDir(), "loopd.toml")
	os.WriteFile(p, []byte("[model]\nname = \"m\"\n"), 0o600)
	c, _, err = loopd.Load(p, "/s")
	if err != nil {
		t.Fatal(err)
	}
	if p := policy(c); p.IdleAfter != 10*time.Minute || p.CompactAt != 60 {
		t.Errorf("epoch policy defaults to %+v, want 10m and 60%%", p)
	}
	c.Epoch.IdleAfterMS = -1
	if p := policy(c); p.IdleAfter != 0 {
		t.Errorf("idle_after_ms = -1 gives %v, want the idle trigger off", p.IdleAfter)
	}
	cl, err := client(c, 0)
	if err != nil || cl == nil {
		t.Errorf("client from a minimal config: %v", err)
	}
}
