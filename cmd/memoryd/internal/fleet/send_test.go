package fleet

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestRunRetriesWithoutANewTurn: the sender, left to itself, retries a
// failed batch when it is due and drains the outbox once Honcho is back,
// with no new turn to wake it.
func TestRunRetriesWithoutANewTurn(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	r.honcho.SetFailure(http.StatusBadGateway)
	want := someTurns(t, r, "run", 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.fleet.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(50 * time.Millisecond)
	r.honcho.SetFailure(0)
	for i := 0; ; i++ {
		if s, _ := r.fleet.Status(); s.Pending == 0 {
			break
		}
		if i > 200 {
			t.Fatal("the sender did not retry")
		}
		time.Sleep(10 * time.Millisecond)
	}
	once(t, r.honcho, want)
}
