package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

func TestMountLockOrdersCalls(t *testing.T) {
	l := newMountLock()
	ctx := context.Background()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	r1, err := l.acquire(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.acquire(short(), false)
	if err != nil {
		t.Fatalf("two shared holders: %v", err)
	}
	if _, err := l.acquire(short(), true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exclusive while shared held = %v", err)
	}
	got := make(chan func(), 1)
	go func() {
		w, err := l.acquire(ctx, true)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(20 * time.Millisecond)
	// A waiting exclusive holder keeps new shared holders out.
	if _, err := l.acquire(short(), false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shared while exclusive waits = %v", err)
	}
	r1()
	r1() // releasing twice is harmless
	select {
	case <-got:
		t.Fatal("exclusive taken while a shared holder remained")
	case <-time.After(20 * time.Millisecond):
	}
	r2()
	w := <-got
	if _, err := l.acquire(short(), false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shared while exclusive held = %v", err)
	}
	w()
	if r, err := l.acquire(short(), true); err != nil {
		t.Fatalf("exclusive when free = %v", err)
	} else {
		r()
	}
}

// TestWritableCallExcludesOthers: while a call with a writable mount
// runs, no other call's container is created (its mounts could be
// swapped for links under it); the other call runs once it is removed.
func TestWritableCallExcludesOthers(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.ToolImage(t), nil)
	rw, ro := t.TempDir(), t.TempDir()
	os.Chmod(rw, 0o777)
	os.WriteFile(filepath.Join(ro, "f"), []byte("hi"), 0o644)
	slow := decide(t, autoGrant("w", "shell", []string{rw}, "writable = true"), "shell", map[string]string{"command": "sleep 4", "workdir": rw})
	read := decide(t, autoGrant("r", "read_file", []string{ro}), "read_file", map[string]string{"path": ro + "/f"})
	slowDone := make(chan time.Time, 1)
	go func() {
		run(t, p, slow)
		slowDone <- time.Now()
	}()
	for {
		out, _ := svc.CLI(nil, "ps", "-q", "--filter", "status=running", "--filter", "label="+LabelInstance+"="+p.instance)
		if strings.TrimSpace(out) != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := run(t, p, read)
	readDone := time.Now()
	if out.Stdout != "hi" {
		t.Errorf("read_file = %+v", out)
	}
	if end := <-slowDone; readDone.Before(end) {
		t.Errorf("read_file ended %v before the writable shell call did", end.Sub(readDone))
	}
}
