package memory

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// fakeMemoryd answers each request with answer(request).
func fakeMemoryd(t *testing.T, answer func(strict.Variant) strict.Variant) string {
	t.Helper()
	on := func(_ context.Context, _ sockets.Peer, v strict.Variant) strict.Variant { return answer(v) }
	return sockettest.Serve(t, filepath.Join(t.TempDir(), "m"), &wire.Memory, rpc.NewServer(&wire.Memory, slog.New(slog.DiscardHandler),
		rpc.On(func(ctx context.Context, p sockets.Peer, r *wire.IdentityRequest) strict.Variant {
			return on(ctx, p, r)
		}),
		rpc.On(func(ctx context.Context, p sockets.Peer, r *wire.TurnDone) strict.Variant { return on(ctx, p, r) })).Serve)
}

func TestIdentityAndTurnDone(t *testing.T) {
	var got []strict.Variant
	path := fakeMemoryd(t, func(v strict.Variant) strict.Variant {
		got = append(got, v)
		switch v.(type) {
		case *wire.IdentityRequest:
			return &wire.IdentityBlock{Text: "# Identity"}
		default:
			return &wire.TurnIndexed{Records: 2}
		}
	})
	c := &Client{Path: path}
	if b, err := c.Identity(context.Background(), "s1", "", 0); err != nil || b != "# Identity" {
		t.Errorf("Identity = %q, %v", b, err)
	}
	if err := c.TurnDone(context.Background(), "s1", 0, 3); err != nil {
		t.Errorf("TurnDone = %v", err)
	}
	if td, ok := got[1].(*wire.TurnDone); !ok || td.Turn != 3 || td.Session != "s1" {
		t.Errorf("memoryd got %#v", got)
	}
}

func TestIdentityRefused(t *testing.T) {
	path := fakeMemoryd(t, func(strict.Variant) strict.Variant {
		return &wire.Error{Op: "identity", Kind: wire.Denied, Msg: "memory/user.md was refused; see docs/runbook.md#memory-file-refused"}
	})
	if _, err := (&Client{Path: path}).Identity(context.Background(), "s1", "", 0); err == nil || !strings.Contains(err.Error(), "memory-file-refused") {
		t.Errorf("Identity = %v, want memoryd's refusal", err)
	}
	if _, err := (&Client{Path: filepath.Join(t.TempDir(), "none")}).Identity(context.Background(), "s1", "", 0); err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#memoryd-unavailable") {
		t.Errorf("Identity without memoryd = %v", err)
	}
}

// TestNotifierNeverWaits: Ended returns at once while memoryd holds each
// turn_done (a slow gate), and memoryd still hears of every turn, in the
// order they ended.
func TestNotifierNeverWaits(t *testing.T) {
	release := make(chan struct{})
	got := make(chan int64, 10)
	path := fakeMemoryd(t, func(v strict.Variant) strict.Variant {
		<-release
		got <- v.(*wire.TurnDone).Turn
		return &wire.TurnIndexed{Records: 1}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := NewNotifier(ctx, &Client{Path: path}, slog.New(slog.DiscardHandler))
	start := time.Now()
	for turn := int64(1); turn <= 3; turn++ {
		n.Ended("s1", 0, turn)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Ended took %v with memoryd holding the turn, want at once", d)
	}
	close(release)
	for want := int64(1); want <= 3; want++ {
		select {
		case turn := <-got:
			if turn != want {
				t.Errorf("memoryd heard of turn %d, want %d (the order they ended)", turn, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("memoryd never heard of turn %d", want)
		}
	}
}

// TestNotifierFull: past MaxPending turns waiting, a turn is not queued
// (memoryd's catch-up indexes it from the log) and a warning says so.
func TestNotifierFull(t *testing.T) {
	release := make(chan struct{})
	path := fakeMemoryd(t, func(strict.Variant) strict.Variant {
		<-release
		return &wire.TurnIndexed{}
	})
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logged strings.Builder
	n := NewNotifier(ctx, &Client{Path: path}, slog.New(slog.NewTextHandler(&logged, nil)))
	for turn := int64(1); turn <= MaxPending+2; turn++ {
		n.Ended("s1", 0, turn)
	}
	n.mu.Lock()
	pending := len(n.pending)
	n.mu.Unlock()
	if pending > MaxPending {
		t.Errorf("%d turns pending, want at most %d", pending, MaxPending)
	}
	if !strings.Contains(logged.String(), "memoryd indexes it from the log at its next start") {
		t.Errorf("no warning for the turn left to catch-up: %q", logged.String())
	}
}
