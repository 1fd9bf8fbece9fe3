//go:build boxmaker_testhooks

package loop

import (
	"log/slog"
	"os"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
)

// killAt is a debug knob for the stack tests, built only with the
// boxmaker_testhooks tag (checks/stack builds loopd so for the test that
// needs it; no release build sets the tag, so no release loopd reads it):
// BOXMAKER_TEST_EPOCH_KILL_AT=baseline|log|commit makes loopd kill
// itself (SIGKILL, as kill -9 would) at that step of every epoch change,
// so a test can show that a crash at any step leaves a session that
// continues.
func killAt(log *slog.Logger) {
	at := os.Getenv("BOXMAKER_TEST_EPOCH_KILL_AT")
	if at == "" {
		return
	}
	log.Warn("debug knob set: loopd kills itself during epoch changes", "step", at)
	session.TestOnlyStep = func(st session.Step) error {
		if string(st) == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute) // the signal is on its way
		}
		return nil
	}
}
