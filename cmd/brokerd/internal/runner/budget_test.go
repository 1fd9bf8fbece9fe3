package runner

import (
	"testing"
	"time"
)

// TestTimeBudgetFitsLoopdsWait: a call at the largest time limit a config
// may set, with its containers' creation and every removal at their
// bounds, ends within loopd's wait for brokerd (review 11).
func TestTimeBudgetFitsLoopdsWait(t *testing.T) {
	limit := time.Duration(MaxTimeoutS) * time.Second
	if w := worstCase(limit); w > callBudget {
		t.Errorf("a %v call can take %v, past the %v budget", limit, w, callBudget)
	}
	if DefaultShellTimeoutS > MaxTimeoutS || DefaultTimeoutS > MaxTimeoutS {
		t.Errorf("defaults %d, %d above the maximum %d", DefaultShellTimeoutS, DefaultTimeoutS, MaxTimeoutS)
	}
	if _, err := (Config{PodmanSocket: "/p.sock", ToolImage: testImage, ShellTimeoutS: MaxTimeoutS + 1}).Check(); err == nil {
		t.Errorf("shell_timeout_s %d accepted", MaxTimeoutS+1)
	}
}
