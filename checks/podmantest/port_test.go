package podmantest

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLockPortTakesTurns: a second holder of a port's lock waits, is
// refused after its wait with the first holder's process id, and gets
// the lock once the first lets go. (flock locks are per open file, so
// two opens in one process contend as two processes would.)
func TestLockPortTakesTurns(t *testing.T) {
	const port = 65001 // a lock only; nothing listens
	unlock, err := lockPort(port, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockPort(port, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "held by process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock while held = %v; want refused naming this process", err)
	}
	done := make(chan error, 1)
	go func() {
		u, err := lockPort(port, 10*time.Second)
		if err == nil {
			u()
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("lock after the first let go: %v", err)
	}
}
