package runner

import (
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

// TestTimeBudgetFitsLoopdsWait: a call at the largest time limit a config
// may set, with its containers' creation and every removal at their
// bounds, ends within loopd's wait for brokerd (review 11).
func TestTimeBudgetFitsLoopdsWait(t *testing.T) {
	limit := time.Duration(brokerd.MaxTimeoutS) * time.Second
	if w := worstCase(limit); w > callBudget {
		t.Errorf("a %v call can take %v, past the %v budget", limit, w, callBudget)
	}
	if brokerd.DefaultShellTimeoutS > brokerd.MaxTimeoutS || brokerd.DefaultTimeoutS > brokerd.MaxTimeoutS {
		t.Errorf("defaults %d, %d above the maximum %d", brokerd.DefaultShellTimeoutS, brokerd.DefaultTimeoutS, brokerd.MaxTimeoutS)
	}
	if _, err := (Config{Runner: brokerd.Runner{PodmanSocket: "/p.sock", ToolImage: testImage, ShellTimeoutS: brokerd.MaxTimeoutS + 1}}).Check(); err == nil {
		t.Errorf("shell_timeout_s %d accepted", brokerd.MaxTimeoutS+1)
	}
}
