package memory

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/rpc"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
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
	if b, err := c.Identity(context.Background(), "s1", 0); err != nil || b != "# Identity" {
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
	if _, err := (&Client{Path: path}).Identity(context.Background(), "s1", 0); err == nil || !strings.Contains(err.Error(), "memory-file-refused") {
		t.Errorf("Identity = %v, want memoryd's refusal", err)
	}
	if _, err := (&Client{Path: filepath.Join(t.TempDir(), "none")}).Identity(context.Background(), "s1", 0); err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#memoryd-unavailable") {
		t.Errorf("Identity without memoryd = %v", err)
	}
}
