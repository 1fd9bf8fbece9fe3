package runner

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// TestRemovalAfterAnswer: a call whose tool exited answers before its
// container is removed (the removal waits here on a gate the test opens
// only after Run has returned), the exited container is still listed
// until then, and Settle leaves nothing.
func TestRemovalAfterAnswer(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.StubImage(t), nil)
	dir := t.TempDir()
	os.WriteFile(dir+"/x", []byte("hi"), 0o644)
	d := decide(t, autoGrant("r", "read_file", []string{dir}), "read_file", map[string]string{"path": dir + "/x"})
	gate := make(chan struct{})
	removing := make(chan string, 1)
	p.beforeRemove = func(id string) {
		removing <- id
		<-gate
	}
	// Were the removal awaited, Run would never return: the gate opens
	// only after it has.
	returned := make(chan Output, 1)
	go func() {
		out, err := p.Run(context.Background(), d)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		returned <- out
	}()
	var out Output
	select {
	case out = <-returned:
	case <-time.After(time.Minute):
		close(gate)
		t.Fatal("Run did not return while its container's removal waited")
	}
	if out.Exit != 3 || out.Stderr != "diag\n" {
		t.Errorf("output = %+v", out)
	}
	var id string
	select {
	case id = <-removing:
	case <-time.After(time.Minute):
		t.Fatal("the call's container was not left to be removed after the answer")
	}
	if l := present(t, svc, p); !slices.ContainsFunc(l, func(s string) bool { return strings.HasPrefix(id, s) }) {
		t.Errorf("after the answer, before the removal: containers %v, want the call's %s still there", l, id)
	}
	close(gate)
	ctx, cancel := context.WithTimeout(context.Background(), SettleWait)
	defer cancel()
	if err := p.Settle(ctx); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if l := present(t, svc, p); len(l) > 0 {
		t.Errorf("after Settle: containers %v left behind", l)
	}
	// Settle with nothing pending returns at once.
	if err := p.Settle(ctx); err != nil {
		t.Errorf("Settle with nothing pending: %v", err)
	}
}

// TestWritableLockHeldUntilRemoved: a call with a writable mount keeps
// the mount lock after its answer, until its container is gone: a second
// writable call cannot start before (it runs out of time waiting, with
// ErrBusy), and starts once the removal has ended.
func TestWritableLockHeldUntilRemoved(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.StubImage(t), nil)
	rw := t.TempDir()
	os.Chmod(rw, 0o777)
	// write_file's mount is writable (the stub only prints and exits).
	d := decide(t, autoGrant("w", "write_file", []string{rw}), "write_file", map[string]string{"path": rw + "/f", "content": "x"})
	gate := make(chan struct{})
	p.beforeRemove = func(string) { <-gate }
	run(t, p, d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if out, err := p.Run(ctx, d); !errors.Is(err, ErrBusy) {
		t.Errorf("a second writable call while the first's container is not yet removed = %+v, %v; want ErrBusy", out, err)
	}
	if l := present(t, svc, p); len(l) != 1 {
		t.Errorf("while the first's removal waits: containers %v, want its one", l)
	}
	close(gate) // later calls' removals pass it
	if out := run(t, p, d); out.Exit != 3 {
		t.Errorf("the second writable call after the removal = %+v", out)
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}
